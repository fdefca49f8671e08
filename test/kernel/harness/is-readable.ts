import { constants } from 'node:fs';
import { access } from 'node:fs/promises';

/** Whether `path` exists and this process may read it. */
export async function isReadable(path: string): Promise<boolean> {
  try {
    await access(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}
