import { readdir } from 'node:fs/promises';
import { KernelHeadersMissingError } from './build-errors.ts';
import { defaultHeadersDirs, findKernelHeaders } from './find-kernel-headers.ts';

const KERNEL_PLACEHOLDER = '{kernel}';

/**
 * Pure: the kernel releases one headers-dir template can name, from a listing of the directory
 * that holds its `{kernel}` segment: `/lib/modules/{kernel}/build` with entries
 * `6.1.0-50-amd64`, `6.1.0-56-amd64` → both; `/usr/src/linux-headers-{kernel}` with
 * `linux-headers-6.1.0-56-amd64`, `linux-headers-6.1.0-56-common`, `linux-kbuild-6.1` →
 * `6.1.0-56-amd64`, `6.1.0-56-common` (the caller keeps only real kbuild trees). A template
 * without `{kernel}` names no kernel.
 */
export function kernelsFromListing(template: string, entries: readonly string[]): string[] {
  const segment = template.split('/').find((s) => s.includes(KERNEL_PLACEHOLDER));
  if (segment === undefined) return [];
  const [prefix = '', suffix = ''] = segment.split(KERNEL_PLACEHOLDER);
  return entries
    .filter((e) => e.length > prefix.length + suffix.length && e.startsWith(prefix) && e.endsWith(suffix))
    .map((e) => e.slice(prefix.length, e.length - suffix.length))
    .filter((release) => !release.includes('/'));
}

/** Pure: the directory listed for a template (the parent of its `{kernel}` segment). */
export function listedDirectory(template: string): string | undefined {
  const segments = template.split('/');
  const index = segments.findIndex((s) => s.includes(KERNEL_PLACEHOLDER));
  if (index < 0) return undefined;
  return segments.slice(0, index).join('/') || '/';
}

/**
 * Every kernel release with an installed kbuild tree (a Makefile and a .config, as the build
 * needs) under the headers-dir templates (`{kernel}` standing for the release; default the
 * build's own: `/lib/modules/{kernel}/build`, `/usr/src/linux-headers-{kernel}`), sorted from
 * the oldest to the newest release. A template whose directory is absent names none.
 */
export async function findInstalledKernels(templates: readonly string[] = defaultHeadersDirs(KERNEL_PLACEHOLDER)): Promise<string[]> {
  const candidates = new Set<string>();
  for (const template of templates) {
    const dir = listedDirectory(template);
    if (dir === undefined) continue;
    let entries: string[];
    try {
      entries = await readdir(dir);
    } catch {
      continue;
    }
    for (const release of kernelsFromListing(template, entries)) candidates.add(release);
  }
  const found: string[] = [];
  for (const release of candidates) {
    try {
      await findKernelHeaders(release, templates.map((t) => t.replaceAll(KERNEL_PLACEHOLDER, release)));
      found.push(release);
    } catch (error) {
      if (!(error instanceof KernelHeadersMissingError)) throw error;
    }
  }
  return found.sort(compareKernelReleases);
}

/** Pure: orders kernel releases by their numbers (`6.1.0-9` before `6.1.0-50`), then as text. */
export function compareKernelReleases(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}
