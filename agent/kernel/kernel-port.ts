import type { LoadedModule } from '../../shared/kmod/loaded-module.ts';

/**
 * Where modprobe finds modules and configuration. `root` is passed as `-d` (modules are read
 * from `<root>/lib/modules/<kernelVersion>/`), `kernelVersion` as `-S`. `configDir` holds the
 * modprobe.d files the agent writes (options, blacklists); the real adapter passes it as `-C`
 * unless it is one of modprobe's default directories (then the defaults are read as usual).
 */
export interface ModuleTree {
  readonly root: string;
  readonly kernelVersion: string;
  readonly configDir: string;
}

/** A .ko file to install, as the build describes it (BuiltModule extends it). */
export interface ModuleFile {
  /** Module name as the kernel spells it in /sys/module (`-` becomes `_`). */
  readonly name: string;
  /** Absolute path of the .ko file (inside the module cache for a build); read-only for consumers. */
  readonly path: string;
  /** `modinfo -F srcversion`; undefined for modules without MODULE_VERSION. */
  readonly srcversion: string | undefined;
  /** `modinfo -F version` (MODULE_VERSION), when the module declares one. */
  readonly version: string | undefined;
  /** `modinfo -F depends`: modules whose symbols this one uses; the real kernel learns this from depmod, the simulated one from here. */
  readonly dependsOn: readonly string[];
  /** Parameters the module declares (`modinfo -F parm`); undefined when not known (e.g. cache entries written before they were recorded). */
  readonly parameters?: readonly string[] | undefined;
  /** Firmware files the module declares (`modinfo -F firmware`), when known; else read from the file when checked. */
  readonly firmware?: readonly string[] | undefined;
}

/** One step of modprobe's plan, in load order, dependencies first. */
export interface LoadStep {
  /** insmod: a .ko to insert; builtin: compiled into the kernel, nothing to load. */
  readonly kind: 'insmod' | 'builtin';
  readonly module: string;
  /** The .ko path ('' for builtin). */
  readonly path: string;
  /** Options from the modprobe.d configuration, as modprobe would pass them. */
  readonly options: string;
}

/**
 * All access to the node's kernel modules. Two adapters: `createRealKernel` (modprobe, rmmod,
 * depmod, /sys/module) and `SimulatedKernel` (in memory, writing a /sys/module-like tree).
 * Implementations never force an unload.
 */
export interface KernelPort {
  /** /sys/module/<name> when the module is loaded (refcnt present), else undefined. */
  readModule(name: string): Promise<LoadedModule | undefined>;
  /** Every loaded module (built-in ones, which have no refcnt, excluded). */
  listLoaded(): Promise<LoadedModule[]>;
  /**
   * Copies the files into `<root>/lib/modules/<kver>/updates/<subdir>/` (replacing what was
   * there) and runs depmod for that tree. `updates/` is searched before the kernel's own modules
   * under every distribution's depmod.d defaults, so a driver replacing an inbox module of the
   * same name (MOFED's mlx5_core) wins; DKMS installs there for the same reason. Does not touch
   * loaded modules.
   */
  installModules(tree: ModuleTree, subdir: string, modules: readonly ModuleFile[]): Promise<void>;
  /**
   * The insmod sequence that loading `modules` needs, dependencies first, regardless of what is
   * loaded now (`modprobe --show-depends`, a dry run). Throws KernelCommandError when one is not
   * in the tree.
   */
  resolveLoadOrder(tree: ModuleTree, modules: readonly string[]): Promise<LoadStep[]>;
  /** `modprobe <module>`: loads it and its dependencies, with options from `tree.configDir`; no-op when loaded. */
  load(tree: ModuleTree, module: string): Promise<void>;
  /** Unloads one module (`rmmod`, never forced). ModuleBusyError when it has users or holders. */
  unload(module: string): Promise<void>;
}
