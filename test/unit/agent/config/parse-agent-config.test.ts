import { describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { ConfigError } from '../../../../shared/errors.ts';

/** The environment a DaemonSet pod gives the agent (downward API plus the driver's settings). */
const podEnv = {
  NODE_NAME: 'gpu-node-1',
  POD_NAME: 'gpu-driver-abcde',
  POD_NAMESPACE: 'gpu-operator',
  DRIVER_NAME: 'gpu',
  DRIVER_VERSION: '570.86.15',
  DRIVER_SOURCE_DIR: '/usr/src/nvidia-570.86.15',
};

function problemsOf(argv: string[], env: Record<string, string>): string[] {
  try {
    parseAgentConfig(argv, env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => `${p.path}: ${p.message}`);
    throw error;
  }
  return [];
}

describe('parseAgentConfig', () => {
  it('a pod environment with defaults for everything else', () => {
    expect(parseAgentConfig([], podEnv)).toMatchObject({
      nodeName: 'gpu-node-1',
      podName: 'gpu-driver-abcde',
      podNamespace: 'gpu-operator',
      driver: 'gpu',
      keyDomain: 'nvidia.com',
      source: { kind: 'directory', path: '/usr/src/nvidia-570.86.15' },
      kernelVersion: undefined,
      deviceSelector: { vendors: ['0x10de'], classPrefixes: ['0x0300', '0x0302'] },
      sysfsRoot: '/sys',
      moduleRoot: '/var/lib/driver-rollout/root',
      hostModuleRoot: '/',
      loadPlan: 'generic',
      loadOptional: [],
      unloadUserHolders: false,
      neverUnload: [],
      firmwareDir: undefined,
      firmwareHostDir: undefined,
      hostFirmwareRoots: ['/lib/firmware'],
      readyFile: '/run/driver-rollout/gpu/.driver-ready',
      lockPath: '/run/driver-rollout/gpu/agent.lock',
      modprobeConfigDir: '/run/modprobe.d',
      httpPort: 8080,
      kernelAdapter: 'real',
      unloadOnStop: false,
      kubeconfig: undefined,
      retry: { initialMs: 10_000, maxMs: 300_000 },
    });
  });

  it("refuses the host's module tree as the driver's module root (its modules would autoload after a reboot)", () => {
    expect(() => parseAgentConfig([], { ...podEnv, MODULE_ROOT: '/' })).toThrow(/--module-root \/ MODULE_ROOT: is the host's module tree \(\/\)/);
  });

  it('load plan settings', () => {
    const c = parseAgentConfig([], { ...podEnv, LOAD_PLAN: 'nvidia', LOAD_OPTIONAL: 'nvidia-drm', UNLOAD_USER_HOLDERS: 'true', FIRMWARE_HOST_DIR: '/var/lib/driver-rollout/gpu/firmware' });
    expect(c).toMatchObject({ loadPlan: 'nvidia', loadOptional: ['nvidia-drm'], unloadUserHolders: true, firmwareHostDir: '/var/lib/driver-rollout/gpu/firmware' });
    expect(() => parseAgentConfig([], { ...podEnv, LOAD_PLAN: 'amd' })).toThrow(/load-plan/);
    expect(parseAgentConfig([], { ...podEnv, NEVER_UNLOAD: 'nvidia_peermem, mlx5-core' }).neverUnload).toEqual(['nvidia_peermem', 'mlx5-core']);
    expect(() => parseAgentConfig([], { ...podEnv, NEVER_UNLOAD: 'ok,bad/name' })).toThrow(/never-unload.*bad\/name/);
  });

  it('flags win over the environment; the demo runs the simulated kernel out of cluster', () => {
    const c = parseAgentConfig(
      ['--kernel', 'simulated', '--kubeconfig', '/tmp/kc', '--node-name', 'kwok-1', '--unload-on-stop', 'true'],
      podEnv,
    );
    expect(c).toMatchObject({ kernelAdapter: 'simulated', kubeconfig: '/tmp/kc', nodeName: 'kwok-1', unloadOnStop: true });
  });

  it('module list, parameters, blacklist, make variables and device filters', () => {
    const c = parseAgentConfig([], {
      ...podEnv,
      DRIVER_NAME: 'ofed',
      DRIVER_MODULES: 'mlx5_core, mlx5_ib',
      MODULE_PARAMETERS: 'mlx5_core.prof_sel=2 mlx5_ib.dc_cnak_qp_depth=4096,mlx5_core.debug_mask=0',
      MODULE_BLACKLIST: 'mlx4_core',
      MAKE_VARIABLES: 'CONFIG_X=y EXTRA=1',
      DEVICE_VENDORS: '15B3',
      DEVICE_CLASSES: '0207',
      HEADERS_DIRS: '/host/usr/src/linux-headers-{kernel},/host/usr/src/kernels/{kernel}',
      DEVICE_FILE_PREFIXES: '/dev/infiniband/uverbs /dev/infiniband/rdma_cm',
    });
    expect(c.deviceFilePrefixes).toEqual(['/dev/infiniband/uverbs', '/dev/infiniband/rdma_cm']);
    expect(c.procDir).toBe('/proc');
    expect(c.headersDirs).toEqual(['/host/usr/src/linux-headers-{kernel}', '/host/usr/src/kernels/{kernel}']);
    expect(c.modules).toEqual(['mlx5_core', 'mlx5_ib']);
    expect(c.moduleParameters).toEqual({ mlx5_core: { prof_sel: '2', debug_mask: '0' }, mlx5_ib: { dc_cnak_qp_depth: '4096' } });
    expect(c.blacklist).toEqual(['mlx4_core']);
    expect(c.recipe).toEqual({ kind: 'kbuild', variables: { CONFIG_X: 'y', EXTRA: '1' } });
    expect(c.deviceSelector).toEqual({ vendors: ['0x15b3'], classPrefixes: ['0x0207'] });
  });

  it('reads a build recipe as JSON: variables keep their spaces and placeholders; prebuilt modules dir', () => {
    const recipe = {
      kind: 'dkms',
      packages: [{ directory: 'mlnx-ofa_kernel-25.10' }, { directory: 'nvidia-peermem', variables: { OFA_DIR: '{built:mlnx-ofa_kernel}', NV_KERNEL_MODULES: 'nvidia nvidia-peermem' } }],
    };
    const c = parseAgentConfig([], { ...podEnv, BUILD_RECIPE: JSON.stringify(recipe), PREBUILT_MODULES_DIR: '/opt/lib/modules', DEPENDENCY_SYMVERS: '/host/ofed/Module.symvers' });
    expect(c.dependencySymvers).toEqual(['/host/ofed/Module.symvers']);
    expect(c.recipe).toEqual({ kind: 'dkms', packages: [{ directory: 'mlnx-ofa_kernel-25.10', variables: {} }, recipe.packages[1]] });
    expect(c.prebuiltDir).toBe('/opt/lib/modules');
  });

  it.each([
    ['a bad recipe field', { BUILD_RECIPE: '{"kind":"make","variables":{"SYSSRC":7}}' }, '--build-recipe / BUILD_RECIPE: build-recipe.variables.SYSSRC: '],
    ['a recipe that is not JSON', { BUILD_RECIPE: 'kind=make' }, '--build-recipe / BUILD_RECIPE: build-recipe: not JSON'],
    ['a relative dependency Module.symvers', { DEPENDENCY_SYMVERS: 'ofed/Module.symvers' }, '--dependency-symvers / DEPENDENCY_SYMVERS: not absolute paths: ofed/Module.symvers'],
    ['a recipe and MAKE_VARIABLES', { BUILD_RECIPE: '{"kind":"kbuild"}', MAKE_VARIABLES: 'A=1' }, '--make-variables / MAKE_VARIABLES: give the variables in --build-recipe'],
  ])('rejects %s, naming the field', (_what, env, start) => {
    const problems = problemsOf([], { ...podEnv, ...env });
    expect(problems).toHaveLength(1);
    expect(problems[0]?.startsWith(start)).toBe(true);
  });

  it('a tarball source needs its sha256', () => {
    const env = { ...podEnv, DRIVER_SOURCE_DIR: '', DRIVER_SOURCE_URL: 'https://example.com/nvidia.tar.xz' };
    expect(problemsOf([], env)).toEqual(['--driver-source-sha256 / DRIVER_SOURCE_SHA256: required with --driver-source-url: downloads are verified']);
    const sha = 'a'.repeat(64);
    expect(parseAgentConfig([], { ...env, DRIVER_SOURCE_SHA256: sha }).source).toEqual({ kind: 'tarball', url: env.DRIVER_SOURCE_URL, sha256: sha });
  });

  it.each([
    { what: 'a directory and a URL', env: { DRIVER_SOURCE_URL: 'https://example.com/x.tgz', DRIVER_SOURCE_SHA256: 'b'.repeat(64) }, path: '--driver-source-dir / DRIVER_SOURCE_DIR' },
    { what: 'an unknown driver without device filters', env: { DRIVER_NAME: 'sample' }, path: '--device-kind / DEVICE_KIND' },
    { what: 'a signing key without certificate', env: { SIGNING_KEY_PATH: '/keys/key.pem' }, path: '--signing-cert / SIGNING_CERT_PATH' },
    { what: 'a bad module name', env: { MODULE_BLACKLIST: 'nouveau;rm -rf' }, path: '--blacklist / MODULE_BLACKLIST' },
    { what: 'a bad kernel adapter', env: { KERNEL_ADAPTER: 'qemu' }, path: '--kernel / KERNEL_ADAPTER' },
    { what: 'a bad boolean', env: { UNLOAD_ON_STOP: 'maybe' }, path: '--unload-on-stop / UNLOAD_ON_STOP' },
    { what: 'a retry cap below the first delay', env: { RETRY_INITIAL_SECONDS: '60', RETRY_MAX_SECONDS: '10' }, path: '--retry-max-seconds / RETRY_MAX_SECONDS' },
    { what: 'a relative device file prefix', env: { DEVICE_FILE_PREFIXES: 'dev/nvidia' }, path: '--device-file-prefixes / DEVICE_FILE_PREFIXES' },
  ])('rejects $what, naming the flag and the variable', ({ env, path }) => {
    const problems = problemsOf([], { ...podEnv, ...env });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${path.replace(/[/-]/g, '\\$&')}: `));
  });

  it('lists every problem at once, including those across fields', () => {
    const problems = problemsOf(['--http-port', 'x'], { DRIVER_NAME: 'GPU', MODULE_PARAMETERS: 'nvidia' });
    expect(problems.map((p) => p.split(':')[0])).toEqual([
      '--node-name / NODE_NAME',
      '--pod-name / POD_NAME',
      '--pod-namespace / POD_NAMESPACE',
      '--driver-name / DRIVER_NAME',
      '--driver-version / DRIVER_VERSION',
      '--http-port / HTTP_PORT',
      '--driver-source-dir / DRIVER_SOURCE_DIR',
      '--module-parameters / MODULE_PARAMETERS',
    ]);
  });

  it('an unknown flag is a problem, not ignored', () => {
    expect(problemsOf(['--nodename', 'x'], podEnv)).toEqual([expect.stringMatching(/^--nodename: unknown flag; known flags: --node-name, /)]);
  });
});
