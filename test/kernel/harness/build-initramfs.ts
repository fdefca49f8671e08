import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync, gzipSync, zstdDecompressSync } from 'node:zlib';
import { isReadable } from './is-readable.ts';
import { KernelTestBedError } from './kernel-test-bed-error.ts';
import type { TestKernel } from './find-test-kernel.ts';
import { S_IFCHR, S_IFDIR, S_IFREG, writeCpio, type CpioEntry } from './write-cpio.ts';

/**
 * What the guest must load before it can mount the host: the virtio PCI transport, 9p over
 * virtio, the 9p file system (which on 6.1 pulls in netfs and fscache) and overlayfs, so the
 * read-only host root becomes a writable root inside the guest only. Their dependencies come
 * from the kernel's own modules.dep, so another kernel version needs no change here.
 */
export const GUEST_BOOT_MODULES = ['virtio_pci', '9pnet_virtio', '9p', 'overlay'] as const;

const BUSYBOX_CANDIDATES = ['/usr/bin/busybox', '/bin/busybox'];
const INIT_SCRIPT = join(import.meta.dirname, 'guest-init.sh');

export function defaultCacheDir(): string {
  return join(homedir(), '.cache', 'driver-rollout');
}

/**
 * Builds (or finds in the cache) the guest's initramfs: static busybox, the boot modules of
 * `kernel` (decompressed: busybox insmod reads plain ELF) and guest-init.sh as /init.
 * The archive is reproducible, so its name carries a hash of its content, i.e. of every input:
 * `<cacheDir>/initramfs-<kver>-<hash>.cpio.gz`. Returns the path.
 */
export async function buildInitramfs(kernel: TestKernel, cacheDir: string = defaultCacheDir()): Promise<string> {
  const busybox = await readStaticBusybox();
  const modules = await resolveModules(kernel.modulesDir, GUEST_BOOT_MODULES);
  const entries: CpioEntry[] = [
    ...['bin', 'dev', 'proc', 'sys', 'host', 'rw', 'newroot', 'lib', 'lib/modules'].map((path) => ({ path, mode: S_IFDIR | 0o755 })),
    // The kernel opens /dev/console for init's stdio before devtmpfs is mounted.
    { path: 'dev/console', mode: S_IFCHR | 0o600, device: { major: 5, minor: 1 } },
    { path: 'bin/busybox', mode: S_IFREG | 0o755, data: busybox },
    { path: 'init', mode: S_IFREG | 0o755, data: await readFile(INIT_SCRIPT) },
    { path: 'lib/modules/order', mode: S_IFREG | 0o644, data: Buffer.from(modules.map((m) => `${m.name}\n`).join('')) },
  ];
  for (const m of modules) {
    entries.push({ path: `lib/modules/${m.name}.ko`, mode: S_IFREG | 0o644, data: await readModule(m.path) });
  }
  const archive = writeCpio(entries);
  const hash = createHash('sha256').update(archive).digest('hex').slice(0, 16);
  const path = join(cacheDir, `initramfs-${kernel.version}-${hash}.cpio.gz`);
  if (await isReadable(path)) return path;
  await mkdir(cacheDir, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, gzipSync(archive));
  await rename(tmp, path);
  return path;
}

interface ModuleFile {
  readonly name: string;
  readonly path: string;
}

/**
 * `roots` and everything they depend on, dependencies first. modules.dep lists each module's
 * full dependency closure with the deepest last, so loading the list backwards works (this is
 * what modprobe does).
 */
export async function resolveModules(modulesDir: string, roots: readonly string[]): Promise<ModuleFile[]> {
  const dep = await readFile(join(modulesDir, 'modules.dep'), 'utf8');
  const byName = new Map<string, { path: string; deps: string[] }>();
  for (const line of dep.split('\n')) {
    const [file, rest] = line.split(':');
    if (file === undefined || rest === undefined) continue;
    byName.set(moduleName(file), { path: file, deps: rest.trim().split(/\s+/).filter((d) => d !== '') });
  }
  const ordered: ModuleFile[] = [];
  const seen = new Set<string>();
  const add = (file: string): void => {
    const name = moduleName(file);
    if (seen.has(name)) return;
    seen.add(name);
    ordered.push({ name, path: join(modulesDir, file) });
  };
  for (const root of roots) {
    const entry = byName.get(root);
    if (entry === undefined) {
      throw new KernelTestBedError(`kernel module ${root} is not in ${modulesDir}/modules.dep: the guest cannot mount the host`, {
        module: root,
        modulesDir,
      });
    }
    for (const d of [...entry.deps].reverse()) add(d);
    add(entry.path);
  }
  return ordered;
}

/** "kernel/net/9p/9pnet_virtio.ko.xz" -> "9pnet_virtio"; the kernel spells '-' as '_'. */
function moduleName(file: string): string {
  return basename(file).replace(/\.ko(\.(xz|zst|gz))?$/, '').replaceAll('-', '_');
}

async function readModule(path: string): Promise<Buffer> {
  if (path.endsWith('.ko')) return readFile(path);
  if (path.endsWith('.ko.zst')) return zstdDecompressSync(await readFile(path));
  if (path.endsWith('.ko.gz')) return gunzipSync(await readFile(path));
  if (path.endsWith('.ko.xz')) {
    // node:zlib has no xz; xz-utils is a required package on Debian.
    const { stdout } = await promisify(execFile)('xz', ['-dc', path], { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 });
    return stdout;
  }
  throw new KernelTestBedError(`unknown kernel module format: ${path}`, { path });
}

/**
 * The guest has no libc in its initramfs, so busybox must be statically linked (Debian's
 * busybox-static; plain `busybox` is dynamic): an ELF with no PT_INTERP program header.
 */
async function readStaticBusybox(): Promise<Buffer> {
  for (const path of BUSYBOX_CANDIDATES) {
    if (!(await isReadable(path))) continue;
    const data = await readFile(path);
    if (hasInterpreter(data)) {
      throw new KernelTestBedError(`${path} is dynamically linked: install the Debian package busybox-static`, { path });
    }
    return data;
  }
  throw new KernelTestBedError(`busybox not found (${BUSYBOX_CANDIDATES.join(', ')}): install the Debian package busybox-static`, {
    candidates: BUSYBOX_CANDIDATES,
  });
}

const PT_INTERP = 3;

/** Reads a 64-bit little-endian ELF's program headers (the only kind an amd64 host has). */
function hasInterpreter(elf: Buffer): boolean {
  if (elf.length < 64 || elf.toString('latin1', 0, 4) !== '\x7fELF') return false;
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    const offset = phoff + i * phentsize;
    if (offset + 4 <= elf.length && elf.readUInt32LE(offset) === PT_INTERP) return true;
  }
  return false;
}

