/**
 * One version read from a file itself: a module's `modinfo` version (or `/sys/module/<m>/version`
 * of a loaded one), a library's file version (`libcuda.so.535.309.01`, what its soname link
 * resolves to), `nvidia-smi`'s own banner.
 */
export interface VersionReading {
  /** The module, soname or program: `nvidia`, `libcuda.so.1`, `nvidia-smi`. */
  readonly name: string;
  /** Where it was read, for people: `nvidia.ko (modinfo)`, `/usr/lib/.../libcuda.so.1 -> libcuda.so.535.309.01`. */
  readonly what: string;
  readonly version: string;
}

/** The user space every NVIDIA root must carry (what the container toolkit and the validator load). */
export const REQUIRED_USER_SPACE: readonly string[] = ['libcuda.so.1', 'libnvidia-ml.so.1', 'nvidia-smi'];

export type UserSpaceVerdict =
  | { readonly kind: 'match'; readonly version: string }
  | {
      readonly kind: 'mismatch';
      /** The modules' version(s), as read; more than one when the modules disagree among themselves. */
      readonly moduleVersions: readonly string[];
      /** User-space readings of another version than the modules'. */
      readonly differing: readonly VersionReading[];
      /** Required names (REQUIRED_USER_SPACE) with no reading at all. */
      readonly missing: readonly string[];
    };

/**
 * Pure: whether the user space is of the modules' release. CUDA and NVML refuse a kernel module of
 * another version than their own, so any difference, or a required part missing, is a mismatch.
 * `required` names the parts that must have a reading (by `name`). Modules without a version (none declared one) are a mismatch too:
 * nothing then says the two belong together.
 */
export function judgeUserSpace(
  modules: readonly VersionReading[],
  userSpace: readonly VersionReading[],
  required: readonly string[] = REQUIRED_USER_SPACE,
): UserSpaceVerdict {
  const moduleVersions = [...new Set(modules.map((m) => m.version))].sort();
  const missing = required.filter((name) => !userSpace.some((r) => r.name === name));
  const only = moduleVersions.length === 1 ? moduleVersions[0] : undefined;
  const differing = userSpace.filter((r) => r.version !== only);
  if (only !== undefined && differing.length === 0 && missing.length === 0) return { kind: 'match', version: only };
  return { kind: 'mismatch', moduleVersions, differing, missing };
}

/** Pure: one line naming what differs, e.g. `modules 535.261.03, user space 535.309.01 (libcuda.so.1 -> ..., nvidia-smi)`. */
export function describeUserSpaceMismatch(verdict: Extract<UserSpaceVerdict, { kind: 'mismatch' }>): string {
  const modules = verdict.moduleVersions.length === 0 ? 'modules declare no version' : `modules ${verdict.moduleVersions.join(' and ')}`;
  const byVersion = new Map<string, string[]>();
  for (const r of verdict.differing) byVersion.set(r.version, [...(byVersion.get(r.version) ?? []), r.what]);
  const parts = [...byVersion].map(([version, whats]) => `user space ${version} (${whats.join(', ')})`);
  if (verdict.missing.length > 0) parts.push(`missing ${verdict.missing.join(', ')}`);
  return `${modules}, ${parts.join('; ')}`;
}
