import { access, readFile } from 'node:fs/promises';

/**
 * Error codes that mean "nothing at this path": ENOENT, and ENOTDIR (a component of the path is a
 * file). Anything else (EACCES, EIO, ...) is a real problem and is not read as "missing".
 */
const MISSING_CODES: readonly string[] = ['ENOENT', 'ENOTDIR'];

/** Whether `error` says the path is missing, or carries one of the `alsoCodes` the caller accepts. */
export function isMissingPathError(error: unknown, alsoCodes: readonly string[] = []): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) return false;
  const code = error.code;
  return typeof code === 'string' && (MISSING_CODES.includes(code) || alsoCodes.includes(code));
}

export interface IfExistsOptions {
  /**
   * More error codes the caller reads as "not there", named where it is true: e.g. sysfs
   * parameters that are write-only (EACCES, EPERM), /proc entries of a process that exited (ESRCH).
   */
  readonly alsoCodes?: readonly string[];
}

/** The result of `operation`, or undefined when the path it touched is missing; other errors are thrown. */
export async function ifExists<T>(operation: () => Promise<T>, options: IfExistsOptions = {}): Promise<T | undefined> {
  try {
    return await operation();
  } catch (error) {
    if (isMissingPathError(error, options.alsoCodes)) return undefined;
    throw error;
  }
}

/** A text file's content, or undefined when there is no file. */
export function readTextIfExists(path: string, options: IfExistsOptions = {}): Promise<string | undefined> {
  return ifExists(() => readFile(path, 'utf8'), options);
}

/**
 * Whether something exists at `path`, following symlinks (a dangling link does not exist).
 * A path that cannot be checked (EACCES on a parent, EIO) throws: it is not reported as missing.
 */
export async function pathExists(path: string): Promise<boolean> {
  const found = await ifExists(async () => {
    await access(path);
    return true;
  });
  return found ?? false;
}
