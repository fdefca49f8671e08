import { mkdtemp, readdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ifExists, isMissingPathError, pathExists, readTextIfExists } from '../../../../shared/fs/if-exists.ts';

let dir: string;
let file: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'if-exists-'));
  file = join(dir, 'file');
  await writeFile(file, 'content\n');
  await symlink(join(dir, 'nowhere'), join(dir, 'dangling'));
  await symlink(join(dir, 'loop'), join(dir, 'loop'));
});

function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: test`), { code });
}

/** An operation that fails with `code`, as a failed fs call does. */
function failingWith(code: string): () => Promise<string> {
  return () => Promise.reject(errno(code));
}

describe('readTextIfExists', () => {
  it('reads a file that is there', async () => {
    expect(await readTextIfExists(file)).toBe('content\n');
  });

  it('is undefined for a missing file (ENOENT) and below a file (ENOTDIR)', async () => {
    expect(await readTextIfExists(join(dir, 'missing'))).toBeUndefined();
    expect(await readTextIfExists(join(file, 'below'))).toBeUndefined();
  });

  it('throws for a path that is there but cannot be read (EISDIR), keeping the error', async () => {
    await expect(readTextIfExists(dir)).rejects.toMatchObject({ code: 'EISDIR' });
  });
});

describe('ifExists', () => {
  it('passes the result through', async () => {
    expect(await ifExists(() => readdir(dir))).toContain('file');
  });

  it('maps only the missing codes to undefined; EACCES is thrown unless the caller names it', async () => {
    expect(await ifExists(failingWith('ENOENT'))).toBeUndefined();
    await expect(ifExists(failingWith('EACCES'))).rejects.toMatchObject({ code: 'EACCES' });
    expect(await ifExists(failingWith('EACCES'), { alsoCodes: ['EACCES'] })).toBeUndefined();
  });

  it('throws errors without a code unchanged', async () => {
    const plain = new Error('plain');
    await expect(ifExists(() => Promise.reject(plain))).rejects.toBe(plain);
  });
});

describe('isMissingPathError', () => {
  it.each([
    { error: errno('ENOENT'), also: [], missing: true },
    { error: errno('ENOTDIR'), also: [], missing: true },
    { error: errno('EACCES'), also: [], missing: false },
    { error: errno('EPERM'), also: ['EACCES', 'EPERM'], missing: true },
    { error: new Error('no code'), also: [], missing: false },
    { error: 'a string', also: [], missing: false },
  ])('$error with $also → $missing', ({ error, also, missing }) => {
    expect(isMissingPathError(error, also)).toBe(missing);
  });
});

describe('pathExists', () => {
  it('is true for a file and a directory', async () => {
    expect(await pathExists(file)).toBe(true);
    expect(await pathExists(dir)).toBe(true);
  });

  it('is false for a missing path, a path below a file, and a dangling symlink', async () => {
    expect(await pathExists(join(dir, 'missing'))).toBe(false);
    expect(await pathExists(join(file, 'below'))).toBe(false);
    expect(await pathExists(join(dir, 'dangling'))).toBe(false);
  });

  it('throws when the path cannot be checked, instead of calling it missing (ELOOP, ENAMETOOLONG)', async () => {
    await expect(pathExists(join(dir, 'loop'))).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(pathExists(join(dir, 'x'.repeat(5000)))).rejects.toMatchObject({ code: 'ENAMETOOLONG' });
  });
});
