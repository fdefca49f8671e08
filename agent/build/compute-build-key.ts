import { createHash } from 'node:crypto';
import type { BuildRecipe } from './build-recipe.ts';

/** Everything that changes the bytes of the built modules, and nothing else (not -j, not paths). */
export interface BuildKeyInputs {
  readonly kernelVersion: string;
  /** Digest of the source tree, or the sha256 of the source tarball. */
  readonly sourceDigest: string;
  /** Files written into the build copy (e.g. version.h), by relative path. */
  readonly generatedFiles: Readonly<Record<string, string>>;
  /** The recipe as configured: kind, targets, package order and variable templates (before per-node expansion). */
  readonly recipe: BuildRecipe;
  /** `gcc --version` of the build environment (the kernel's CC comes from the headers of `kernelVersion`). */
  readonly compilerVersion: string;
  /** sha256 of each Module.symvers of other drivers built against, by a name of the caller's. */
  readonly dependencySymvers: Readonly<Record<string, string>>;
  /** sha256 of the signing certificate, when modules are signed. */
  readonly signingCertificateSha256: string | undefined;
}

/** Bumped when the cache layout or the meaning of a key changes, so old entries are not reused. */
const KEY_FORMAT = 2;

/** The cache key: sha256 over a canonical JSON of the inputs (object keys sorted at every level). */
export function computeBuildKey(inputs: BuildKeyInputs): string {
  const canonical = JSON.stringify(
    canonicalize([
      KEY_FORMAT,
      inputs.kernelVersion,
      inputs.sourceDigest,
      inputs.generatedFiles,
      inputs.recipe,
      inputs.compilerVersion,
      inputs.dependencySymvers,
      inputs.signingCertificateSha256 ?? null,
    ]),
  );
  return createHash('sha256').update(canonical).digest('hex');
}

/** Objects become sorted [key, value] lists, so key order never changes the digest; array order does. */
function canonicalize(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalize);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => [k, canonicalize(v)]);
  }
  return value;
}
