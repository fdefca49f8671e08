import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { moduleConfigSha256 } from '../../../../agent/kernel/module-config-sha256.ts';
import { ModuleConfigError, readModuleConfig } from '../../../../agent/kernel/read-module-config.ts';
import { hostBlacklistFile, removeHostBlacklist, writeHostBlacklist } from '../../../../agent/kernel/host-blacklist.ts';
import { describeFailure } from '../../../../agent/describe-failure.ts';

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
