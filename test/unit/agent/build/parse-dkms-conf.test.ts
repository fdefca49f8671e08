import { describe, expect, it } from 'vitest';
import { BuildConfigError } from '../../../../agent/build/build-errors.ts';
import { parseDkmsConf } from '../../../../agent/build/parse-dkms-conf.ts';

const context = { kernelver: '6.1.0-56-amd64', arch: 'x86_64' };

describe('parseDkmsConf', () => {
  it("reads Debian nvidia-open-kernel-dkms's dkms.conf: four records, DEST names from $PACKAGE_NAME, a continued MAKE line", () => {
    // Debian's four records, written as the package does (one BUILT/DEST triple per module).
    const records = ['', '-modeset', '-drm', '-uvm']
      .map((suffix, i) => `BUILT_MODULE_NAME[${i}]="nvidia${suffix}"\nDEST_MODULE_NAME[${i}]="$PACKAGE_NAME${suffix}"\nDEST_MODULE_LOCATION[${i}]="/updates/dkms"`)
      .join('\n');
    const text = `# DKMS configuration for the NVIDIA kernel module.  -*- sh -*-
PACKAGE_NAME="nvidia-current-open"
PACKAGE_VERSION="535.261.03"
BUILD_EXCLUSIVE_KERNEL="^(3\\.[1-9][0-9]|[4-9]\\.)"
MAKE[0]="env NV_VERBOSE=1 \\
    make \${parallel_jobs+-j$parallel_jobs} modules KERNEL_UNAME=\${kernelver}"
CLEAN="true"
${records}
`;
    const conf = parseDkmsConf(text, context);
    expect(conf.packageName).toBe('nvidia-current-open');
    expect(conf.packageVersion).toBe('535.261.03');
    expect(conf.modules.map((m) => [m.builtName, m.destName])).toEqual([
      ['nvidia', 'nvidia-current-open'],
      ['nvidia-modeset', 'nvidia-current-open-modeset'],
      ['nvidia-drm', 'nvidia-current-open-drm'],
      ['nvidia-uvm', 'nvidia-current-open-uvm'],
    ]);
    expect(conf.modules.every((m) => m.destLocation === '/updates/dkms' && m.builtLocation === '')).toBe(true);
  });

  it('applies dkms defaults: a lone record named after the package, DEST_MODULE_NAME from BUILT_MODULE_NAME, locations ending in /', () => {
    expect(parseDkmsConf('PACKAGE_NAME=r8168\nPACKAGE_VERSION=8.051.02\nDEST_MODULE_LOCATION[0]="/updates/dkms"\n', context).modules).toEqual([
      { builtName: 'r8168', builtLocation: '', destName: 'r8168', destLocation: '/updates/dkms' },
    ]);
    const located = parseDkmsConf("PACKAGE_NAME=a; PACKAGE_VERSION=1\nBUILT_MODULE_NAME[0]=mlx5_core\nBUILT_MODULE_LOCATION[0]='drivers/net/ethernet/mellanox/mlx5/core'\n", context);
    expect(located.modules[0]).toEqual({ builtName: 'mlx5_core', builtLocation: 'drivers/net/ethernet/mellanox/mlx5/core/', destName: 'mlx5_core', destLocation: '' });
  });

  it('expands ${kernelver}, ${arch}, ${VAR:-default} and keeps single quotes literal; records PRE_BUILD and POST_BUILD', () => {
    const conf = parseDkmsConf(
      [
        'PACKAGE_NAME=ofa', 'PACKAGE_VERSION=25.10',
        'PRE_BUILD="ofed_scripts/configure --kernel-version=${kernelver} --arch $arch"',
        'POST_BUILD=ofed_scripts/post_build.sh   # keeps headers',
        'BUILT_MODULE_NAME[0]=${MISSING:-mlx_compat}',
        "BUILT_MODULE_NAME[1]='lit$eral'",
      ].join('\n'),
      context,
    );
    expect(conf.preBuild).toBe('ofed_scripts/configure --kernel-version=6.1.0-56-amd64 --arch x86_64');
    expect(conf.postBuild).toBe('ofed_scripts/post_build.sh');
    expect(conf.modules.map((m) => m.builtName)).toEqual(['mlx_compat', 'lit$eral']);
  });

  it.each([
    ['no PACKAGE_NAME', 'PACKAGE_VERSION=1\nBUILT_MODULE_NAME[0]=a', /PACKAGE_NAME is not set/],
    ['no modules', 'PACKAGE_NAME=a\nPACKAGE_VERSION=1', /declares no modules/],
    ['a .ko suffix', 'PACKAGE_NAME=a\nPACKAGE_VERSION=1\nBUILT_MODULE_NAME[0]=a.ko', /must not end in \.o or \.ko/],
    ['a gap in the records', 'PACKAGE_NAME=a\nPACKAGE_VERSION=1\nBUILT_MODULE_NAME[0]=a\nBUILT_MODULE_NAME[2]=c', /record 1 has no BUILT_MODULE_NAME/],
    ['command substitution', 'PACKAGE_NAME=a\nPACKAGE_VERSION=1\nBUILT_MODULE_NAME[0]="$(uname -r)"', /command substitution/],
  ])('refuses %s with a BuildConfigError naming the file', (_name, text, message) => {
    expect(() => parseDkmsConf(text, context, 'pkg/dkms.conf')).toThrow(BuildConfigError);
    expect(() => parseDkmsConf(text, context, 'pkg/dkms.conf')).toThrow(message);
    expect(() => parseDkmsConf(text, context, 'pkg/dkms.conf')).toThrow(/^pkg\/dkms\.conf: /);
  });
});
