import type { VersionReading } from '../../../../agent/user-space/plan/judge-user-space.ts';

/** Where Debian's packages put NVIDIA's libraries (libcuda1, libnvidia-ml1, ...), relative to the root. */
export const DEBIAN_LIBS = 'usr/lib/x86_64-linux-gnu/nvidia/current';

/** The readings of Debian's libcuda1, libnvidia-cfg1 and libnvidia-ml1 of one release, in the reader's (name) order. */
export function debianLibraryReadings(version: string): VersionReading[] {
  return ['libcuda', 'libnvidia-cfg', 'libnvidia-ml'].map((lib) => ({ name: `${lib}.so.1`, what: `/${DEBIAN_LIBS}/${lib}.so.1 -> ${lib}.so.${version}`, version }));
}
