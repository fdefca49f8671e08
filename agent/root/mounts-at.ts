import { readFile } from 'node:fs/promises';

/** Mount points in /proc/<pid>/mountinfo escape space, tab, newline and backslash as octal. */
function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * The mounts stacked at `path` (exactly there, not below), as this process's mount namespace
 * shows them (`/proc/self/mountinfo`), bottom first: their mount IDs. Empty when nothing is
 * mounted there.
 */
export async function mountsAt(path: string, mountinfo = '/proc/self/mountinfo'): Promise<number[]> {
  const wanted = path.replace(/\/+$/, '');
  const text = await readFile(mountinfo, 'utf8');
  const ids: number[] = [];
  for (const line of text.split('\n')) {
    // <mount ID> <parent ID> <major:minor> <root> <mount point> ...
    const fields = line.split(' ');
    if (fields.length < 5) continue;
    if (unescapeMountPath(fields[4] ?? '') === wanted) ids.push(Number(fields[0]));
  }
  return ids;
}
