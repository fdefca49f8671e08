/**
 * A loaded kernel module as /sys/module/<name> shows it. A module is loaded when
 * `/sys/module/<name>/refcnt` exists (built-in modules have a directory but no refcnt).
 */
export interface LoadedModule {
  readonly name: string;
  /** Users of the module: other modules (holders) plus open files, mounts, etc. */
  readonly refcnt: number;
  /** Modules that use symbols of this one: `/sys/module/<name>/holders/*`. */
  readonly holders: readonly string[];
  /** Present only for modules built with MODULE_VERSION (or a kernel that adds it). */
  readonly srcversion: string | undefined;
  readonly version: string | undefined;
  /** Current values of the module's parameters readable from `/sys/module/<name>/parameters`. */
  readonly parameters: Readonly<Record<string, string>>;
}

/** The kernel spells module names with `_` in /sys/module even when the file uses `-`. */
export function sysfsModuleName(name: string): string {
  return name.replaceAll('-', '_');
}
