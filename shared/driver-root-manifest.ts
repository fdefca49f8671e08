/**
 * The manifest every driver root carries (drivers/stage-driver-root.ts writes it into the image's
 * root; the agent reads it before publishing, agent/root/): which driver release the root's user
 * space is and what it was made from. Its sha256 names the root's copy on the host, so a root of
 * other content is another copy, and a published root is known by it.
 */
export const DRIVER_ROOT_MANIFEST = 'etc/driver-rollout/driver-root.json';

export interface DriverRootManifest {
  /** The image flavour (drivers/flavours.ts), or any name a custom image gives. */
  readonly flavour: string;
  /** The upstream release of the user space: the modules' own. */
  readonly driverVersion: string;
  /** `<package>=<version>` of every Debian package unpacked into the root. */
  readonly packages: readonly string[];
  /** sha256 over the root's files before the manifest was written. */
  readonly sha256: string;
}

/** The manifest's fields, or a sentence saying which one is missing or wrong. */
export function parseDriverRootManifest(text: string): DriverRootManifest | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
  if (typeof value !== 'object' || value === null) return 'not a JSON object';
  const record = value as Record<string, unknown>;
  for (const field of ['flavour', 'driverVersion', 'sha256'] as const) {
    if (typeof record[field] !== 'string' || record[field] === '') return `${field}: must be a non-empty string`;
  }
  const packages = record['packages'];
  if (!Array.isArray(packages) || !packages.every((p) => typeof p === 'string')) return 'packages: must be a list of strings';
  return { flavour: record['flavour'] as string, driverVersion: record['driverVersion'] as string, packages, sha256: record['sha256'] as string };
}
