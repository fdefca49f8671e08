/**
 * Where a driver root keeps NVIDIA's user space, relative to the root, searched in this order:
 * Debian's packages (`/usr/lib/x86_64-linux-gnu/nvidia/current/`, `/usr/lib/nvidia/current/`,
 * behind update-alternatives), then the places NVIDIA's own installer and driver container use.
 * The first directory holding a name wins.
 */
export const USER_SPACE_LIBRARY_DIRS: readonly string[] = [
  'usr/lib/x86_64-linux-gnu/nvidia/current',
  'usr/lib/x86_64-linux-gnu',
  'usr/lib64',
  'usr/lib',
];

export const USER_SPACE_BINARY_DIRS: readonly string[] = ['usr/lib/nvidia/current', 'usr/bin', 'usr/sbin', 'bin'];

/** NVIDIA's libraries by their soname links (`libcuda.so.1`), the names the toolkit loads. */
export const NVIDIA_SONAME = /^(libcuda|libnvidia-[A-Za-z0-9-]+)\.so\.1$/;

/** A library file named with its full version: `libnvidia-ml.so.535.309.01` → `535.309.01`. */
export function fileVersion(fileName: string): string | undefined {
  return /\.so\.(\d+\.\d+(?:\.\d+)?)$/.exec(fileName)?.[1];
}

/** nvidia-smi's own banner (`nvidia-smi -h`, which needs no driver): `NVIDIA System Management Interface -- v535.309.01`. */
export function nvidiaSmiVersion(helpText: string): string | undefined {
  return /Management Interface\s+--\s+v(\d+\.\d+(?:\.\d+)?)/.exec(helpText)?.[1];
}
