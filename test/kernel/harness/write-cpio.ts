/**
 * A file in an initramfs. Modes carry the file type (S_IFREG, S_IFDIR, S_IFCHR, S_IFLNK).
 * `data` is the content of a regular file or the target of a symlink.
 */
export interface CpioEntry {
  readonly path: string;
  readonly mode: number;
  readonly data?: Buffer;
  /** Device numbers of a character or block device node. */
  readonly device?: { readonly major: number; readonly minor: number };
}

export const S_IFDIR = 0o040000;
export const S_IFREG = 0o100000;
export const S_IFLNK = 0o120000;
export const S_IFCHR = 0o020000;

const TRAILER = 'TRAILER!!!';

/**
 * The "newc" cpio archive the kernel unpacks as an initramfs (Documentation/driver-api/
 * early-userspace/buffer-format.rst): a 110-byte ASCII header per file, the NUL-terminated
 * name, the data, each padded to 4 bytes. Written here so the harness needs no cpio binary;
 * every file is owned by root with mtime 0 so the archive is reproducible.
 */
export function writeCpio(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  let inode = 1;
  for (const entry of [...entries, { path: TRAILER, mode: 0 }]) {
    const data = entry.data ?? Buffer.alloc(0);
    const name = Buffer.from(`${entry.path.replace(/^\/+/, '')}\0`);
    const device = 'device' in entry ? entry.device : undefined;
    const fields = [
      entry.path === TRAILER ? 0 : inode++,
      entry.mode,
      0, // uid
      0, // gid
      (entry.mode & S_IFDIR) === S_IFDIR ? 2 : 1, // nlink
      0, // mtime
      data.length,
      0, // dev major
      0, // dev minor
      device?.major ?? 0,
      device?.minor ?? 0,
      name.length,
      0, // check
    ];
    const header = Buffer.from(`070701${fields.map((f) => f.toString(16).padStart(8, '0')).join('')}`, 'ascii');
    parts.push(header, name, padding(header.length + name.length), data, padding(data.length));
  }
  return Buffer.concat(parts);
}

function padding(length: number): Buffer {
  return Buffer.alloc((4 - (length % 4)) % 4);
}
