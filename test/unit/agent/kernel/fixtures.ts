import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModuleFile, ModuleTree } from '../../../../agent/kernel/kernel-port.ts';
import type { DriverToLoad } from '../../../../agent/kernel/reload-driver.ts';

/** One module directory of a fixture /sys/module tree, as the kernel lays it out. */
export interface SysModuleFixture {
  readonly name: string;
  readonly refcnt: number;
  readonly holders?: readonly string[];
  readonly srcversion?: string;
  readonly version?: string;
  readonly parameters?: Readonly<Record<string, string>>;
}

/** Writes `<dir>/<module>/{refcnt,holders/*,srcversion,version,parameters/*}`; holders are symlinks as in sysfs. */
export async function writeSysModuleTree(dir: string, modules: readonly SysModuleFixture[]): Promise<void> {
  for (const m of modules) {
    const moduleDir = join(dir, m.name);
    await mkdir(join(moduleDir, 'holders'), { recursive: true });
    await mkdir(join(moduleDir, 'parameters'), { recursive: true });
    await writeFile(join(moduleDir, 'refcnt'), `${m.refcnt}\n`);
    if (m.srcversion !== undefined) await writeFile(join(moduleDir, 'srcversion'), `${m.srcversion}\n`);
    if (m.version !== undefined) await writeFile(join(moduleDir, 'version'), `${m.version}\n`);
    for (const h of m.holders ?? []) await symlink(join('..', '..', h), join(moduleDir, 'holders', h));
    for (const [p, v] of Object.entries(m.parameters ?? {})) await writeFile(join(moduleDir, 'parameters', p), `${v}\n`);
  }
}

/** A fake srcversion that differs per module and version (23 hex digits like modpost's). */
export function fakeSrcversion(module: string, version: string): string {
  let h = 0n;
  for (const ch of `${module}@${version}`) h = (h * 131n + BigInt(ch.charCodeAt(0))) % 16n ** 23n;
  return h.toString(16).toUpperCase().padStart(23, '0');
}

/**
 * The sample driver as the build would describe it, without compiling (for the simulated kernel,
 * which never opens the files): drsample_net depends on drsample_core.
 */
export function aSampleDriver(version: string, kernelVersion = '6.1.0-56-amd64'): DriverToLoad {
  const module = (name: string, dependsOn: string[]): ModuleFile => ({
    name,
    path: `/cache/${kernelVersion}/${version}/${name}.ko`,
    srcversion: fakeSrcversion(name, version),
    version,
    dependsOn,
  });
  return { driver: 'drsample', version, kernelVersion, modules: [module('drsample_core', []), module('drsample_net', ['drsample_core'])] };
}

export interface Scratch {
  readonly dir: string;
  readonly sysModuleDir: string;
  readonly tree: ModuleTree;
}

export async function aScratch(prefix: string, kernelVersion = '6.1.0-56-amd64'): Promise<Scratch> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const sysModuleDir = join(dir, 'sys-module');
  await mkdir(sysModuleDir);
  return { dir, sysModuleDir, tree: { root: join(dir, 'root'), kernelVersion, configDir: join(dir, 'modprobe.d') } };
}

/** A real process (`sleep`) holding `file` open on fd 3 until killed (an hour at most, longer than any test on a loaded machine); resolves once it runs. */
export async function holdOpen(file: string): Promise<ChildProcess> {
  const fd = openSync(file, 'r');
  try {
    const child = spawn('sleep', ['3600'], { stdio: ['ignore', 'ignore', 'inherit', fd] });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return child;
  } finally {
    closeSync(fd);
  }
}
