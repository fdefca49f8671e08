import { mkdir, open, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleepFor } from 'node:timers/promises';
import { sysfsModuleName, type LoadedModule } from '../../shared/kmod/loaded-module.ts';
import { readLoadedModule } from '../../shared/kmod/read-loaded-module.ts';
import { findDeviceUsers } from '../../agent/kernel/find-device-users.ts';
import { KernelCommandError, ModuleBusyError } from '../../agent/kernel/kernel-errors.ts';
import type { KernelPort, LoadStep, ModuleFile, ModuleTree } from '../../agent/kernel/kernel-port.ts';
import { installDir } from '../../agent/kernel/real-kernel.ts';
import { parseModprobeConfig } from '../../agent/kernel/plan/modprobe-config.ts';

export interface SimulatedKernelOptions {
  /** Where the /sys/module-like tree is written (read back with shared/kmod, like the real one). */
  readonly sysModuleDir: string;
  /** `uname -r` of the simulated kernel: modules from a tree of another release fail to load (ENOEXEC). */
  readonly runningKernelVersion: string;
  /** How long a module's init takes (default 0); the local demo uses seconds, like nvidia's. */
  readonly loadDurationMs?: (module: string) => number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
  /**
   * Where the kernel's memory (installed module trees, live modules) is kept between processes.
   * A real kernel outlives the agent's container: a restarted agent (a new driver pod) must find
   * the old driver still loaded. Without a file, the state lives as long as this object.
   * Open device references belong to the process that holds them and are not kept. Processes
   * sharing one file share one kernel, as the agents of several drivers on a node do: each call
   * reads the kernel's memory afresh, and changes to it are made one at a time (`<stateFile>.lock`),
   * so one driver's module that uses another's symbols holds it for every process.
   */
  readonly stateFile?: string;
  /**
   * The node's /dev: a loaded module gets a device file `<deviceDir>/<module>` (removed on
   * unload, as devtmpfs does), and any process holding it open, in any pod, counts in the
   * module's refcnt, found in `procDir` (default /proc) as the kernel's file references are. Lets
   * another process (a simulated device plugin) hold the driver across agents.
   */
  readonly deviceDir?: string;
  readonly procDir?: string;
}

interface PersistedState {
  readonly installed: readonly (readonly [string, readonly ModuleFile[]])[];
  readonly live: readonly { readonly file: ModuleFile; readonly parameters: Readonly<Record<string, string>>; readonly holders: readonly string[] }[];
}

/** One thing the simulated kernel did, for tests that check what happened and in which order. */
export interface SimulatedKernelEvent {
  readonly op: 'depmod' | 'insmod' | 'rmmod';
  readonly module: string;
  readonly at: number;
}

interface LiveModule {
  readonly file: ModuleFile;
  readonly parameters: Readonly<Record<string, string>>;
  /** Modules that use this one's symbols. */
  readonly holders: Set<string>;
  /** References from outside the module graph (open device files) taken through openDevice. */
  userReferences: number;
  /** Processes holding the module's file in `deviceDir` open, as last counted. */
  processReferences: number;
}

/**
 * An in-memory kernel with modprobe's and the module loader's rules: dependencies load first and
 * become holders, a module with refcnt > 0 refuses to unload (EBUSY, never forced), loading a
 * loaded module is a no-op, options come from modprobe.d files in the tree's configDir, and a
 * tree for another kernel release is rejected. State is mirrored to `sysModuleDir` as
 * /sys/module does it (refcnt, holders/ links, srcversion, version, parameters/).
 */
export class SimulatedKernel implements KernelPort {
  readonly history: SimulatedKernelEvent[] = [];
  readonly #options: SimulatedKernelOptions;
  readonly #installed = new Map<string, Map<string, ModuleFile>>();
  readonly #live = new Map<string, LiveModule>();
  readonly #initFailures = new Map<string, string>();
  #restored: Promise<void> | undefined;
  #changes: Promise<unknown> = Promise.resolve();
  #writes = 0;

  constructor(options: SimulatedKernelOptions) {
    this.#options = options;
  }

  async readModule(name: string): Promise<LoadedModule | undefined> {
    await this.#restore();
    await this.#countProcessReferences(sysfsModuleName(name));
    return readLoadedModule(this.#options.sysModuleDir, name);
  }

  async listLoaded(): Promise<LoadedModule[]> {
    await this.#restore();
    const out: LoadedModule[] = [];
    for (const name of [...this.#live.keys()].sort()) {
      const module = await this.readModule(name);
      if (module !== undefined) out.push(module);
    }
    return out;
  }

  async installModules(tree: ModuleTree, subdir: string, modules: readonly ModuleFile[]): Promise<void> {
    await this.#locked(() => this.#installModules(tree, subdir, modules));
  }

  async #installModules(tree: ModuleTree, subdir: string, modules: readonly ModuleFile[]): Promise<void> {
    await this.#restore();
    const key = treeKey(tree);
    const files = this.#installed.get(key) ?? new Map<string, ModuleFile>();
    for (const [name, file] of files) {
      if (file.path.startsWith(`${installDir(tree, subdir)}/`)) files.delete(name);
    }
    for (const m of modules) {
      files.set(sysfsModuleName(m.name), { ...m, name: sysfsModuleName(m.name), path: join(installDir(tree, subdir), `${m.name}.ko`) });
    }
    this.#installed.set(key, files);
    this.#record('depmod', subdir);
    await this.#persist();
  }

  async resolveLoadOrder(tree: ModuleTree, modules: readonly string[]): Promise<LoadStep[]> {
    await this.#restore();
    const config = await this.#readConfig(tree);
    const steps: LoadStep[] = [];
    for (const module of modules) {
      for (const file of this.#dependencyChain(tree, sysfsModuleName(module), `modprobe --show-depends ${module}`)) {
        if (steps.some((s) => s.module === file.name)) continue;
        const options = Object.entries(config.options.get(file.name) ?? {}).map(([k, v]) => (/\s/.test(v) ? `${k}="${v}"` : `${k}=${v}`));
        steps.push({ kind: 'insmod', module: file.name, path: file.path, options: options.join(' ') });
      }
    }
    return steps;
  }

  async load(tree: ModuleTree, module: string): Promise<void> {
    await this.#locked(() => this.#load(tree, module));
  }

  async #load(tree: ModuleTree, module: string): Promise<void> {
    await this.#restore();
    const name = sysfsModuleName(module);
    if (this.#live.has(name)) return;
    const command = `modprobe ${module}`;
    const chain = this.#dependencyChain(tree, name, command);
    const config = await this.#readConfig(tree);
    for (const file of chain) {
      if (this.#live.has(file.name)) continue;
      if (tree.kernelVersion !== this.#options.runningKernelVersion) {
        throw new KernelCommandError({ command, exitCode: 1, stderr: `modprobe: ERROR: could not insert '${name}': Exec format error` });
      }
      await this.#insert(file, config.options.get(file.name) ?? {}, command, name);
    }
  }

  async unload(module: string): Promise<void> {
    await this.#locked(() => this.#unload(module));
  }

  async #unload(module: string): Promise<void> {
    await this.#restore();
    const name = sysfsModuleName(module);
    const live = this.#live.get(name);
    const command = `rmmod ${name}`;
    if (live === undefined) {
      throw new KernelCommandError({ command, exitCode: 1, stderr: `rmmod: ERROR: Module ${name} is not currently loaded` });
    }
    await this.#countProcessReferences(name);
    if (live.holders.size > 0 || live.userReferences > 0 || live.processReferences > 0) {
      const by = live.holders.size > 0 ? ` by: ${[...live.holders].sort().join(' ')}` : '';
      throw new ModuleBusyError({ command, exitCode: 1, stderr: `rmmod: ERROR: Module ${name} is in use${by}` });
    }
    this.#live.delete(name);
    await rm(join(this.#options.sysModuleDir, name), { recursive: true, force: true });
    if (this.#options.deviceDir !== undefined) await rm(join(this.#options.deviceDir, name), { force: true });
    for (const dependency of live.file.dependsOn) {
      this.#live.get(dependency)?.holders.delete(name);
      await this.#writeSysfs(dependency);
    }
    this.#record('rmmod', name);
    await this.#persist();
  }

  /**
   * A process opens the module's device: refcnt goes up with no holder to explain it. With the
   * module unloaded the device node is gone (ENOENT), as devtmpfs removes it on misc_deregister.
   */
  async openDevice(module: string): Promise<{ close(): Promise<void> }> {
    await this.#restore();
    const name = sysfsModuleName(module);
    const live = this.#live.get(name);
    if (live === undefined) throw new KernelCommandError({ command: `open /dev/${name}`, exitCode: undefined, stderr: 'No such file or directory (ENOENT)' });
    live.userReferences++;
    await this.#writeSysfs(name);
    let closed = false;
    return {
      close: async () => {
        if (closed) return;
        closed = true;
        // The module's entry as this process knows it now (re-read from a shared state file since).
        const current = this.#live.get(name) ?? live;
        current.userReferences--;
        await this.#writeSysfs(name);
      },
    };
  }

  /** The next inserts of `module` fail in its init function with this errno text (e.g. "No such device"). */
  failInit(module: string, errnoText: string): void {
    this.#initFailures.set(sysfsModuleName(module), errnoText);
  }

  clearInitFailure(module: string): void {
    this.#initFailures.delete(sysfsModuleName(module));
  }

  /**
   * The module and its installed dependencies, dependencies first, as modules.dep orders them.
   * A dependency that is not installed is left out (depmod cannot resolve it either); inserting
   * the module then fails unless that dependency is loaded.
   */
  #dependencyChain(tree: ModuleTree, module: string, command: string): ModuleFile[] {
    const files = this.#installed.get(treeKey(tree));
    const root = files?.get(module);
    if (root === undefined) {
      const dir = join(tree.root, 'lib', 'modules', tree.kernelVersion);
      throw new KernelCommandError({ command, exitCode: 1, stderr: `modprobe: FATAL: Module ${module} not found in directory ${dir}` });
    }
    const chain: ModuleFile[] = [];
    const visit = (file: ModuleFile): void => {
      if (chain.includes(file)) return;
      for (const dependency of file.dependsOn) {
        const installed = files?.get(dependency);
        if (installed !== undefined) visit(installed);
      }
      chain.push(file);
    };
    visit(root);
    return chain;
  }

  /**
   * Like modprobe, a refusal names `requested` (the module modprobe was asked for), whichever of
   * its chain the kernel refused: `modprobe nvidia_uvm` says "could not insert 'nvidia_uvm'" when
   * nvidia's init failed (seen on Debian 6.1 under QEMU). The inserted ones stay loaded.
   */
  async #insert(file: ModuleFile, parameters: Readonly<Record<string, string>>, command: string, requested: string): Promise<void> {
    const duration = this.#options.loadDurationMs?.(file.name) ?? 0;
    if (duration > 0) await (this.#options.sleep ?? sleepFor)(duration);
    if (file.dependsOn.some((d) => !this.#live.has(d))) {
      throw new KernelCommandError({ command, exitCode: 1, stderr: `modprobe: ERROR: could not insert '${requested}': Unknown symbol in module, or unknown parameter (see dmesg)` });
    }
    const failure = this.#initFailures.get(file.name);
    if (failure !== undefined) {
      throw new KernelCommandError({ command, exitCode: 1, stderr: `modprobe: ERROR: could not insert '${requested}': ${failure}` });
    }
    this.#live.set(file.name, { file, parameters: declaredOnly(file, parameters), holders: new Set(), userReferences: 0, processReferences: 0 });
    await this.#createDeviceFile(file.name);
    await this.#writeSysfs(file.name);
    for (const dependency of file.dependsOn) {
      this.#live.get(dependency)?.holders.add(file.name);
      await this.#writeSysfs(dependency);
    }
    this.#record('insmod', file.name);
    await this.#persist();
  }

  /**
   * Reads the kernel's memory from `stateFile`: the first time it also rewrites /sys/module from
   * it; later, it takes in what other processes sharing the file changed (their loads and
   * unloads), keeping this process's own device references.
   */
  async #restore(): Promise<void> {
    const first = this.#restored === undefined;
    this.#restored ??= this.#readState(true);
    await this.#restored;
    if (!first) await this.#readState(false);
  }

  async #readState(rewriteSysfs: boolean): Promise<void> {
    const path = this.#options.stateFile;
    if (path === undefined) return;
    let state: PersistedState;
    try {
      state = JSON.parse(await readFile(path, 'utf8')) as PersistedState;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    this.#installed.clear();
    for (const [key, files] of state.installed) this.#installed.set(key, new Map(files.map((f) => [f.name, f])));
    const before = new Map(this.#live);
    this.#live.clear();
    for (const m of state.live) {
      const kept = before.get(m.file.name);
      this.#live.set(m.file.name, { file: m.file, parameters: m.parameters, holders: new Set(m.holders), userReferences: kept?.userReferences ?? 0, processReferences: kept?.processReferences ?? 0 });
    }
    if (rewriteSysfs) for (const name of this.#live.keys()) await this.#writeSysfs(name);
  }

  /**
   * Runs a change of the kernel's memory alone: one at a time in this process and, with a state
   * file, among the processes sharing it (an exclusive `<stateFile>.lock` holding the owner's
   * pid; a lock whose owner is gone is taken over, as the kernel outlives a killed agent).
   */
  async #locked<T>(change: () => Promise<T>): Promise<T> {
    const run = this.#changes.then(async () => {
      const path = this.#options.stateFile;
      if (path === undefined) return change();
      const lock = `${path}.lock`;
      await mkdir(dirname(lock), { recursive: true });
      for (;;) {
        try {
          const handle = await open(lock, 'wx');
          await handle.writeFile(`${process.pid}\n`);
          await handle.close();
          break;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
          if (!(await lockOwnerAlive(lock))) await rm(lock, { force: true });
          else await sleepFor(5);
        }
      }
      try {
        return await change();
      } finally {
        await rm(lock, { force: true });
      }
    });
    this.#changes = run.catch(() => undefined);
    return run;
  }

  async #persist(): Promise<void> {
    const path = this.#options.stateFile;
    if (path === undefined) return;
    const state: PersistedState = {
      installed: [...this.#installed].map(([key, files]) => [key, [...files.values()]] as const),
      live: [...this.#live.values()].map((m) => ({ file: m.file, parameters: m.parameters, holders: [...m.holders] })),
    };
    await writeFile(`${path}.tmp`, JSON.stringify(state));
    await rename(`${path}.tmp`, path);
  }

  /**
   * Rewrites the module's /sys/module entry in place, each file replaced whole (as sysfs shows a
   * value changing, never a missing module): another process (the agent of another driver on the
   * node) reading it meanwhile sees the old or the new state.
   */
  async #writeSysfs(name: string): Promise<void> {
    const live = this.#live.get(name);
    if (live === undefined) return;
    const dir = join(this.#options.sysModuleDir, name);
    await mkdir(join(dir, 'holders'), { recursive: true });
    await mkdir(join(dir, 'parameters'), { recursive: true });
    await this.#replaceFile(join(dir, 'refcnt'), `${live.holders.size + live.userReferences + live.processReferences}\n`);
    await this.#replaceFile(join(dir, 'initstate'), 'live\n');
    if (live.file.srcversion !== undefined) await this.#replaceFile(join(dir, 'srcversion'), `${live.file.srcversion}\n`);
    if (live.file.version !== undefined) await this.#replaceFile(join(dir, 'version'), `${live.file.version}\n`);
    for (const old of await readdir(join(dir, 'holders'))) if (!live.holders.has(old)) await rm(join(dir, 'holders', old), { force: true });
    for (const holder of live.holders) await symlink(join('..', '..', holder), join(dir, 'holders', holder)).catch(ignoreExisting);
    for (const old of await readdir(join(dir, 'parameters'))) if (!(old in live.parameters)) await rm(join(dir, 'parameters', old), { force: true });
    for (const [parameter, value] of Object.entries(live.parameters)) await this.#replaceFile(join(dir, 'parameters', parameter), `${value}\n`);
  }

  /** Writes `path` whole (through a file beside the /sys/module tree): a reader sees the old contents or the new ones. */
  async #replaceFile(path: string, text: string): Promise<void> {
    const dir = `${this.#options.sysModuleDir}.tmp`;
    await mkdir(dir, { recursive: true });
    const temporary = join(dir, `${process.pid}-${++this.#writes}`);
    await writeFile(temporary, text);
    await rename(temporary, path);
  }

  async #createDeviceFile(name: string): Promise<void> {
    const dir = this.#options.deviceDir;
    if (dir === undefined) return;
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, name), '');
  }

  /** Recounts the processes that hold the module's device file open and rewrites its refcnt when that changed. */
  async #countProcessReferences(name: string): Promise<void> {
    const dir = this.#options.deviceDir;
    const live = this.#live.get(name);
    if (dir === undefined || live === undefined) return;
    const count = (await findDeviceUsers(this.#options.procDir ?? '/proc', [join(dir, name)])).length;
    if (count === live.processReferences) return;
    live.processReferences = count;
    await this.#writeSysfs(name);
  }

  async #readConfig(tree: ModuleTree): Promise<ReturnType<typeof parseModprobeConfig>> {
    let names: string[];
    try {
      names = (await readdir(tree.configDir)).filter((n) => n.endsWith('.conf')).sort();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return parseModprobeConfig([]);
      throw error;
    }
    return parseModprobeConfig(await Promise.all(names.map((n) => readFile(join(tree.configDir, n), 'utf8'))));
  }

  #record(op: SimulatedKernelEvent['op'], module: string): void {
    this.history.push({ op, module, at: this.#now() });
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }
}

/**
 * The kernel keeps the parameters a module declares and ignores the rest ("unknown parameter
 * 'x' ignored" in dmesg; the load succeeds). Without a declared list, every option is kept.
 */
function declaredOnly(file: ModuleFile, parameters: Readonly<Record<string, string>>): Record<string, string> {
  const declared = file.parameters;
  return Object.fromEntries(Object.entries(parameters).filter(([name]) => declared === undefined || declared.includes(name)));
}

function ignoreExisting(error: unknown): void {
  if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
}

/** Whether the process named in a lock file still runs (an unreadable or empty file: assume so, it is being written). */
async function lockOwnerAlive(lock: string): Promise<boolean> {
  const pid = Number.parseInt(await readFile(lock, 'utf8').catch(() => ''), 10);
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function treeKey(tree: ModuleTree): string {
  return `${tree.root}\0${tree.kernelVersion}`;
}
