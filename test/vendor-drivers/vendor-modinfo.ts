import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Every value of one modinfo field of a .ko file (`firmware` and `depends` may repeat). */
export async function modinfoField(path: string, field: string): Promise<string[]> {
  const { stdout } = await run('modinfo', ['-F', field, path]);
  return stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '');
}

/** The kernel release a module was built for: the first word of its vermagic. */
export async function vermagicRelease(path: string): Promise<string | undefined> {
  return (await modinfoField(path, 'vermagic'))[0]?.split(/\s+/)[0];
}
