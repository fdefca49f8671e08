import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planGpuDaemons } from '../../../agent/daemons/plan/plan-gpu-daemons.ts';
import { DEVICE_KIND_SELECTORS, selectDevices } from '../../../agent/detect/device-selector.ts';
import { readPciDevices } from '../../../agent/detect/read-pci-devices.ts';
import { judgeUserSpace } from '../../../agent/user-space/plan/judge-user-space.ts';
import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';
import { anHgxNode } from '../../fixtures/sysfs/sysfs-tree.ts';
import { debianLibraryReadings } from '../agent/user-space/debian-layout.ts';

// scripts/capture-gpu-node.sh against a FIXTURE node (sysfs's layout: an HGX board's 8 GPUs and 4
// NVSwitches, a loaded nvidia module of the 580 release the GPU machines here run, its
// /proc/driver/nvidia, and a shell script STANDING IN for nvidia-smi). Its run on a real kernel is
// test/kernel/capture-gpu-node.test.ts.

const SCRIPT = resolve(import.meta.dirname, '../../../scripts/capture-gpu-node.sh');
let work: string;
let node: string;

/** Every file under `dir` with its content (links as `-> target`), to show the node is unchanged. */
async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isFile()) out.push(`${path} ${await readFile(path, 'utf8')}`);
    else out.push(`${path} ${entry.isSymbolicLink() ? 'link' : 'dir'}`);
  }
  return out.sort();
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'capture-gpu-node-'));
  node = join(work, 'node');
  await anHgxNode().writeTo(join(node, 'sys'));
  const nvidia = join(node, 'sys', 'module', 'nvidia');
  await mkdir(join(nvidia, 'holders'), { recursive: true });
  await mkdir(join(nvidia, 'parameters'), { recursive: true });
  await writeFile(join(nvidia, 'refcnt'), '3\n');
  await writeFile(join(nvidia, 'version'), '580.95.05\n');
  await writeFile(join(nvidia, 'srcversion'), 'B1E8A6F5C0D2E3F4A5B6C7D\n');
  await writeFile(join(nvidia, 'parameters', 'NVreg_EnableGpuFirmware'), '18\n');
  // A built-in-like entry without refcnt is not a loaded module.
  await mkdir(join(node, 'sys', 'module', 'nvidia_builtin_like', 'parameters'), { recursive: true });
  await mkdir(join(node, 'proc', 'driver', 'nvidia', 'gpus', '0000:18:00.0'), { recursive: true });
  await writeFile(join(node, 'proc', 'driver', 'nvidia', 'version'), 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05\n');
  await writeFile(join(node, 'proc', 'driver', 'nvidia', 'gpus', '0000:18:00.0', 'information'), 'Model: NVIDIA H100 80GB HBM3\n');
  await writeFile(join(node, 'nvidia-smi'), '#!/bin/sh\n# stand-in for nvidia-smi\n[ "$1" = -q ] && echo "Driver Version                            : 580.95.05"\n', { mode: 0o755 });
}, 60_000);
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

const capture = (out: string, ...extra: string[]) =>
  execa('sh', [SCRIPT, '--sysfs', join(node, 'sys'), '--proc', join(node, 'proc'), '--nvidia-smi', join(node, 'nvidia-smi'), ...extra, out], { reject: false });

// The script forks for some files: the bound is for a loaded 2-core machine.
describe('scripts/capture-gpu-node.sh', { timeout: 120_000 }, () => {
  it("captures the NVIDIA functions, the nvidia modules, the driver's /proc entries and nvidia-smi -q, reading only", async () => {
    const before = await snapshot(node);
    const out = join(work, 'capture');
    const run = await capture(out);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toBe(`capture-gpu-node: 13 PCI function(s), 1 module(s) into ${out}`);
    expect(await snapshot(node)).toEqual(before);
    expect(await readFile(join(out, 'proc', 'driver', 'nvidia', 'version'), 'utf8')).toContain('580.95.05');
    expect(await readFile(join(out, 'nvidia-smi-q.txt'), 'utf8')).toContain('Driver Version                            : 580.95.05');
    expect(await readFile(join(out, 'nvidia-smi-q.exit-code'), 'utf8')).toBe('0\n');
    expect(await readFile(join(out, 'capture.txt'), 'utf8')).toContain('pci_functions=13\nloaded_modules=1\nabsent=\n');
  });

  it('reads back through the agent: GPUs, NVSwitches (fabric manager needed), the loaded 580 driver against an image of 535', async () => {
    const out = join(work, 'capture-read');
    expect((await capture(out)).exitCode).toBe(0);
    const all = await readPciDevices(join(out, 'sys'));
    const gpus = selectDevices(all, DEVICE_KIND_SELECTORS.gpu);
    expect(all).toEqual((await readPciDevices(join(node, 'sys'))).filter((d) => d.vendor === '0x10de'));
    expect(gpus).toHaveLength(8);
    const none = { persistenced: undefined, fabricManager: undefined, libraryDir: undefined, fabricManagerConfig: undefined };
    expect(planGpuDaemons(gpus, all, none)).toMatchObject({ kind: 'refuse', nvSwitches: ['0000:05:00.0', '0000:06:00.0', '0000:07:00.0', '0000:08:00.0'] });
    const nvidia = await readLoadedModule(join(out, 'sys', 'module'), 'nvidia');
    expect(nvidia).toEqual(await readLoadedModule(join(node, 'sys', 'module'), 'nvidia'));
    const verdict = judgeUserSpace([{ name: 'nvidia', what: '/sys/module/nvidia/version', version: nvidia?.version ?? '' }], [...debianLibraryReadings('535.309.01'), { name: 'nvidia-smi', what: 'nvidia-smi', version: '535.309.01' }]);
    expect(verdict).toMatchObject({ kind: 'mismatch', moduleVersions: ['580.95.05'] });
  });

  it('refuses to write into a directory that is not empty, and says what it needs', async () => {
    const out = join(work, 'full');
    await mkdir(out);
    await writeFile(join(out, 'something'), '');
    const run = await capture(out);
    expect(run).toMatchObject({ exitCode: 2, stderr: `capture-gpu-node: ${out} is not empty: give a new directory` });
    const usage = await execa('sh', [SCRIPT], { reject: false });
    expect(usage).toMatchObject({ exitCode: 2, stderr: 'capture-gpu-node: usage: capture-gpu-node.sh [options] <output directory> (see --help)' });
  });

  it('records what the node lacks', async () => {
    const out = join(work, 'capture-bare');
    const run = await execa('sh', [SCRIPT, '--sysfs', join(node, 'sys'), '--proc', join(work, 'no-proc'), '--nvidia-smi', join(work, 'no-nvidia-smi'), out], { reject: false });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(await readFile(join(out, 'capture.txt'), 'utf8')).toContain(`absent=${join(work, 'no-proc')}/driver/nvidia nvidia-smi\n`);
  });
});
