/** One kernel module produced by a build, as stored in the module cache. */
export interface BuiltModule {
  /** Module name as the kernel spells it in /sys/module (`-` becomes `_`). */
  readonly name: string;
  /** Absolute path of the .ko file inside the cache entry; read-only for consumers. */
  readonly path: string;
  /** `modinfo -F srcversion`; undefined for modules without MODULE_VERSION. */
  readonly srcversion: string | undefined;
  /** `modinfo -F version` (MODULE_VERSION), when the module declares one. */
  readonly version: string | undefined;
  /** `modinfo -F depends`: modules whose symbols this one uses (they must be loaded first). */
  readonly dependsOn: readonly string[];
  /** `modinfo -F parm` names; undefined for cache entries written before they were recorded. */
  readonly parameters?: readonly string[] | undefined;
  /** sha256 of the .ko file, checked against the cache manifest on every cache hit. */
  readonly sha256: string;
}

/** What `buildDriver` produced (or found in the cache) for one kernel. */
export interface BuiltDriver {
  readonly driver: string;
  readonly version: string;
  readonly kernelVersion: string;
  /** In kbuild's modules.order. */
  readonly modules: readonly BuiltModule[];
  /** Digest of kernel version, sources, generated files, make variables and signing certificate. */
  readonly cacheKey: string;
  readonly cacheHit: boolean;
  readonly signed: boolean;
  /** Wall time of buildDriver, including fetch, compile and cache I/O. */
  readonly durationMs: number;
}
