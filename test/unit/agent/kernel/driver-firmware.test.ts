import { mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkDeclaredFirmware, installDriverFirmware, PARTIAL_FIRMWARE_SUFFIX } from '../../../../agent/kernel/driver-firmware.ts';
import { FirmwareMissingError, FirmwareUncheckableError } from '../../../../agent/kernel/kernel-errors.ts';
import type { ModuleFile } from '../../../../agent/kernel/kernel-port.ts';

const KVER = '6.1.0-56-amd64';
const GSP = 'nvidia/580.142/gsp_ga10x.bin';
const nvidia = (firmware: readonly string[]): ModuleFile => ({ name: 'nvidia', path: '/cache/nvidia.ko', srcversion: undefined, version: '580.142', dependsOn: [], firmware });

describe('checkDeclaredFirmware', () => {
  let dir: string;
  let root: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'driver-firmware-'));
    root = join(dir, 'lib-firmware');
    await mkdir(join(root, 'nvidia', '580.142'), { recursive: true });
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('passes when every declared file is in a search dir', async () => {
    await writeFile(join(root, GSP), 'gsp');
    await expect(checkDeclaredFirmware([nvidia([GSP])], KVER, { hostRoots: [root] })).resolves.toBeUndefined();
  });

  it('names the file absent from every search dir (ENOENT, or ENOTDIR through a file)', async () => {
    await writeFile(join(root, 'nvidia', '580.999'), 'a file where a dir would be');
    const attempt = checkDeclaredFirmware([nvidia([GSP, 'nvidia/580.999/gsp_tu10x.bin'])], KVER, { hostRoots: [root] });
    await expect(attempt).rejects.toBeInstanceOf(FirmwareMissingError);
    await expect(attempt).rejects.toThrow(/^firmware missing: nvidia needs nvidia\/580\.142\/gsp_ga10x\.bin; nvidia needs nvidia\/580\.999\/gsp_tu10x\.bin /);
  });

  // The file system refuses to say (a symlink loop here; EACCES under a host policy, EIO on a bad
  // disk): the file may well be there, so it is never counted as absent.
  it('a place that cannot be checked is an error naming the module, the file and the path, with the cause', async () => {
    await symlink(join(root, 'nvidia', 'loop'), join(root, 'nvidia', 'loop'));
    const firmware = 'nvidia/loop/gsp_ga10x.bin';
    const attempt = checkDeclaredFirmware([nvidia([firmware])], KVER, { hostRoots: [root] });
    await expect(attempt).rejects.toBeInstanceOf(FirmwareUncheckableError);
    const error = (await attempt.catch((e: unknown) => e)) as FirmwareUncheckableError;
    const path = join(root, firmware);
    expect(error.message).toBe(`firmware ${path} that nvidia needs cannot be checked (ELOOP); nothing was unloaded`);
    expect(error.fields).toEqual({ module: 'nvidia', firmware, path, code: 'ELOOP' });
    expect(error.cause).toMatchObject({ code: 'ELOOP' });
  });
});

describe('installDriverFirmware', () => {
  let dir: string;
  let source: string;
  let hostDir: string;
  let classPathFile: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'install-firmware-'));
    source = join(dir, 'image-firmware');
    hostDir = join(dir, 'host', 'gpu');
    classPathFile = join(dir, 'firmware_class-path');
    await mkdir(join(source, 'nvidia', '580.300'), { recursive: true });
    await writeFile(join(source, 'nvidia', '580.300', 'gsp_ga10x.bin'), 'whole firmware');
    await symlink('gsp_ga10x.bin', join(source, 'nvidia', '580.300', 'gsp_ad10x.bin'));
    await writeFile(classPathFile, '/opt/vendor-firmware\n');
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('finishes what a killed copy left (a partial file and a truncated one), and leaves no partial file', async () => {
    await mkdir(join(hostDir, 'nvidia', '580.300'), { recursive: true });
    await writeFile(join(hostDir, 'nvidia', '580.300', `gsp_ga10x.bin${PARTIAL_FIRMWARE_SUFFIX}`), 'whole fi');
    await writeFile(join(hostDir, 'nvidia', '580.300', `gsp_tu10x.bin${PARTIAL_FIRMWARE_SUFFIX}`), 'of a file the source no longer has');
    await installDriverFirmware({ sourceDir: source, hostDir, classPathFile });
    expect((await readdir(join(hostDir, 'nvidia', '580.300'))).sort()).toEqual(['gsp_ad10x.bin', 'gsp_ga10x.bin']);
    expect(await readFile(join(hostDir, 'nvidia', '580.300', 'gsp_ga10x.bin'), 'utf8')).toBe('whole firmware');
    expect(await readlink(join(hostDir, 'nvidia', '580.300', 'gsp_ad10x.bin'))).toBe('gsp_ga10x.bin');
  });

  it('points firmware_class at the host dir and reports the path before it, also to a later agent that finds it switched', async () => {
    expect(await installDriverFirmware({ sourceDir: source, hostDir, classPathFile })).toEqual({ previousPath: '/opt/vendor-firmware' });
    expect(await readFile(classPathFile, 'utf8')).toBe(hostDir);
    // A new agent (the one before was killed): the path is the driver's already, the record says what it was.
    expect(await installDriverFirmware({ sourceDir: source, hostDir, classPathFile })).toEqual({ previousPath: '/opt/vendor-firmware' });
  });
});
