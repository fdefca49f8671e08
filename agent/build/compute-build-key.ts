import { createHash } from 'node:crypto';

/** Everything that changes the bytes of the built modules, and nothing else (not -j, not paths). */
export interface BuildKeyInputs {
  readonly kernelVersion: string;
  /** Digest of the source tree, or the sha256 of the source tarball. */
  readonly sourceDigest: string;
  /** Files written into the build copy (e.g. version.h), by relative path. */
  readonly generatedFiles: Readonly<Record<string, string>>;
  readonly makeVariables: Readonly<Record<string, string>>;
  /** sha256 of the signing certificate, when modules are signed. */
  readonly signingCertificateSha256: string | undefined;
}

/** Bumped when the cache layout or the meaning of a key changes, so old entries are not reused. */
const KEY_FORMAT = 1;

/** The cache key: sha256 over a canonical JSON of the inputs (object keys sorted). */
export function computeBuildKey(inputs: BuildKeyInputs): string {
  const canonical = JSON.stringify([
    KEY_FORMAT,
    inputs.kernelVersion,
    inputs.sourceDigest,
    sortedEntries(inputs.generatedFiles),
    sortedEntries(inputs.makeVariables),
    inputs.signingCertificateSha256 ?? null,
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}

function sortedEntries(record: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
