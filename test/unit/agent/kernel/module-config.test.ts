import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mergeModuleParameters, moduleConfigSha256, parseModuleConfig } from '../../../../agent/kernel/module-config.ts';
import { ModuleConfigError, readModuleConfig } from '../../../../agent/kernel/read-module-config.ts';
import { hostBlacklistFile, removeHostBlacklist, writeHostBlacklist } from '../../../../agent/kernel/host-blacklist.ts';
import { describeFailure } from '../../../../agent/describe-failure.ts';

describe('module config files (<module>.conf, the GPU Operator convention)', () => {
  it.each([
    { case: 'items on one line', files: [{ name: 'nvidia.conf', content: 'NVreg_EnableGpuFirmware=0 NVreg_OpenRmEnableUnsupportedGpus=1' }], parameters: { nvidia: { NVreg_EnableGpuFirmware: '0', NVreg_OpenRmEnableUnsupportedGpus: '1' } } },
    { case: 'one item per line with comments', files: [{ name: 'nvidia.conf', content: '# persistence\nNVreg_EnableGpuFirmware=0  # off\n\n' }], parameters: { nvidia: { NVreg_EnableGpuFirmware: '0' } } },
    { case: 'a dash in the file name is the kernel underscore', files: [{ name: 'nvidia-uvm.conf', content: 'uvm_perf_prefetch_enable=0' }], parameters: { nvidia_uvm: { uvm_perf_prefetch_enable: '0' } } },
    { case: 'an empty file sets nothing', files: [{ name: 'nvidia.conf', content: '' }], parameters: {} },
  ])('parses $case', ({ files, parameters }) => {
    expect(parseModuleConfig(files)).toEqual({ parameters, problems: [] });
  });

  it('names every item that is not parameter=value, and a file not named <module>.conf', () => {
    expect(parseModuleConfig([{ name: 'nvidia.conf', content: 'NVreg_A=1 oops =2' }, { name: 'notes.txt', content: 'x=1' }]).problems).toEqual([
      'nvidia.conf: "oops" is not parameter=value',
      'nvidia.conf: "=2" is not parameter=value',
      'notes.txt: not named <module>.conf',
    ]);
  });

  it('checksums the files whatever their order, and any change of a name or a byte changes it', () => {
    const a = { name: 'nvidia.conf', content: 'NVreg_A=1' };
    const b = { name: 'nvidia-uvm.conf', content: 'x=2' };
    expect(moduleConfigSha256([a, b])).toBe(moduleConfigSha256([b, a]));
    expect(moduleConfigSha256([a, b])).not.toBe(moduleConfigSha256([a, { ...b, content: 'x=3' }]));
    expect(moduleConfigSha256([a])).not.toBe(moduleConfigSha256([{ ...a, name: 'nvidia_x.conf' }]));
  });

  it('is the checksum the chart computes: sha256 of "<file>=<base64>;" sorted by file (helm: b64enc, sha256sum)', () => {
    // printf 'nvidia.conf=%s;' "$(printf 'NVreg_EnableGpuFirmware=0' | base64 -w0)" | sha256sum
    expect(moduleConfigSha256([{ name: 'nvidia.conf', content: 'NVreg_EnableGpuFirmware=0' }])).toBe('c72787d270d1a62f2e40c926e7a61d9495b8a731c02d419d339ea4e6bf6a53a5');
  });

  it('lets a file override MODULE_PARAMETERS parameter by parameter', () => {
    expect(mergeModuleParameters({ nvidia: { a: '1', b: '2' }, drm: { x: '1' } }, { nvidia: { b: '3' } })).toEqual({ nvidia: { a: '1', b: '3' }, drm: { x: '1' } });
  });
});

describe('readModuleConfig: the mounted ConfigMap', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });
  async function aMountedConfigMap(files: Record<string, string>): Promise<string> {
    dir = await mkdtemp(join(tmpdir(), 'module-config-'));
    // As the kubelet mounts a ConfigMap: files in a timestamped dir, ..data and per-key links.
    await mkdir(join(dir, '..2026_11_27'));
    for (const [name, content] of Object.entries(files)) {
      await writeFile(join(dir, '..2026_11_27', name), content);
      await symlink(join('..data', name), join(dir, name));
    }
    await symlink('..2026_11_27', join(dir, '..data'));
    return dir;
  }

  it('reads the parameters when the files are the ones the template names', async () => {
    const files = { 'nvidia.conf': 'NVreg_EnableGpuFirmware=0' };
    const mounted = await aMountedConfigMap(files);
    const sha256 = moduleConfigSha256(Object.entries(files).map(([name, content]) => ({ name, content })));
    await expect(readModuleConfig({ dir: mounted, sha256 })).resolves.toEqual({ nvidia: { NVreg_EnableGpuFirmware: '0' } });
  });

  it('refuses files changed after the template was made, naming both checksums; the agent reports ModuleConfigInvalid', async () => {
    const mounted = await aMountedConfigMap({ 'nvidia.conf': 'NVreg_EnableGpuFirmware=1' });
    const expected = moduleConfigSha256([{ name: 'nvidia.conf', content: 'NVreg_EnableGpuFirmware=0' }]);
    const error = await readModuleConfig({ dir: mounted, sha256: expected }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModuleConfigError);
    expect((error as Error).message).toContain(`MODULE_CONFIG_SHA256 ${expected}`);
    expect(describeFailure('load', error).reason).toBe('ModuleConfigInvalid');
  });

  it('refuses an item that is not parameter=value', async () => {
    const mounted = await aMountedConfigMap({ 'nvidia.conf': 'NVreg_EnableGpuFirmware' });
    await expect(readModuleConfig({ dir: mounted, sha256: undefined })).rejects.toThrow(/nvidia\.conf: "NVreg_EnableGpuFirmware" is not parameter=value/);
  });
});

describe('the host blacklist file: the one persistent host file a driver owns', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('is driver-rollout-<driver>-blacklist.conf, written with the competing modules and removed whole', async () => {
    dir = await mkdtemp(join(tmpdir(), 'modprobe-d-'));
    await writeHostBlacklist(dir, 'gpu', ['nouveau']);
    const file = hostBlacklistFile(dir, 'gpu');
    expect(file).toBe(join(dir, 'driver-rollout-gpu-blacklist.conf'));
    expect(await readFile(file, 'utf8')).toContain('blacklist nouveau\n');
    await removeHostBlacklist(dir, 'gpu');
    await expect(readFile(file, 'utf8')).rejects.toThrow(/ENOENT/);
  });

  it('writes no file for a driver without competing modules, and removes an earlier one', async () => {
    dir = await mkdtemp(join(tmpdir(), 'modprobe-d-'));
    await writeHostBlacklist(dir, 'gpu', ['nouveau']);
    await writeHostBlacklist(dir, 'gpu', []);
    await expect(readFile(hostBlacklistFile(dir, 'gpu'), 'utf8')).rejects.toThrow(/ENOENT/);
  });
});
