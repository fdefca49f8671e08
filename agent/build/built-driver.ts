import type { ModuleFile } from '../kernel/kernel-port.ts';

/** One kernel module produced by a build, as stored in the module cache: a ModuleFile the kernel port installs. */
export interface BuiltModule extends ModuleFile {
  /** sha256 of the .ko file, checked against the cache manifest on every cache hit. */
  readonly sha256: string;
}

/** What `buildDriver` produced (or found in the cache) for one kernel. */
export interface BuiltDriver {
  readonly driver: string;
  readonly version: string;
  readonly kernelVersion: string;
  /** In build order: kbuild's modules.order, the make recipe's sorted matches, dkms's BUILT_MODULE_* records. */
  readonly modules: readonly BuiltModule[];
  /** Digest of kernel version, sources, generated files, make variables and signing certificate. */
  readonly cacheKey: string;
  readonly cacheHit: boolean;
  /** The modules came ready-built with the image (`prebuiltDir`), verified, not compiled. */
  readonly prebuilt?: boolean;
  readonly signed: boolean;
  /** Wall time of buildDriver, including fetch, compile and cache I/O. */
  readonly durationMs: number;
}
