import { access } from 'node:fs/promises';

/** Whether something exists at `path` (following symlinks: a dangling link does not exist). */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
