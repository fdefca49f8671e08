import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { buildInitramfs, resolveModules } from './harness/build-initramfs.ts';
import { findTestKernel } from './harness/find-test-kernel.ts';
import { KernelTestBedError } from './harness/kernel-test-bed-error.ts';

describe('finding a kernel to boot', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kernel-bed-find-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('fails naming QEMU and the packages to install when qemu is not on PATH', async () => {
    const found = findTestKernel({ qemuCommand: 'qemu-system-none-such' });
    await expect(found).rejects.toThrow(KernelTestBedError);
    await expect(found).rejects.toThrow(/qemu-system-none-such is not on PATH.*qemu-system-x86 linux-image-amd64/);
  });

  it('fails naming the missing image, modules and headers rather than skipping', async () => {
    await mkdir(join(dir, 'boot'));
    await writeFile(join(dir, 'boot', 'vmlinuz-9.9.9-1-amd64'), '');
    const found = findTestKernel({ bootDir: join(dir, 'boot'), modulesRoot: join(dir, 'modules') });
    await expect(found).rejects.toThrow(/9\.9\.9-1-amd64: modules of 9\.9\.9-1-amd64 are not installed.*headers of 9\.9\.9-1-amd64 are not installed/);
  });

  it('finds the installed Debian kernel with its modules and headers', async () => {
    const kernel = await findTestKernel();
    expect(kernel.image).toBe(`/boot/vmlinuz-${kernel.version}`);
    expect(kernel.buildDir).toBe(`/lib/modules/${kernel.version}/build`);
  });
});

describe('the initramfs', () => {
  it('lists the boot modules after every module they depend on, as modprobe would load them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kernel-bed-dep-'));
    await writeFile(
      join(dir, 'modules.dep'),
      [
        'kernel/fs/netfs/netfs.ko:',
        'kernel/fs/fscache/fscache.ko.xz: kernel/fs/netfs/netfs.ko',
        'kernel/fs/9p/9p.ko.zst: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko.xz kernel/fs/netfs/netfs.ko',
        'kernel/net/9p/9pnet.ko:',
        'kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko',
        'kernel/drivers/virtio/virtio.ko:',
        '',
      ].join('\n'),
    );
    const modules = await resolveModules(dir, ['9pnet_virtio', '9p']);
    await rm(dir, { recursive: true, force: true });
    expect(modules.map((m) => m.name)).toEqual(['virtio', '9pnet', '9pnet_virtio', 'netfs', 'fscache', '9p']);
    expect(modules[4]?.path).toBe(join(dir, 'kernel/fs/fscache/fscache.ko.xz'));
  });

  it('is cached under a name that changes with its content and holds /init, busybox and the modules', async () => {
    const kernel = await findTestKernel();
    const cacheDir = await mkdtemp(join(tmpdir(), 'kernel-bed-cache-'));
    const first = await buildInitramfs(kernel, cacheDir);
    const second = await buildInitramfs(kernel, cacheDir);
    const archive = gunzipSync(await readFile(first)).toString('latin1');
    await rm(cacheDir, { recursive: true, force: true });
    expect(second).toBe(first);
    expect(first).toMatch(new RegExp(`/initramfs-${kernel.version}-[0-9a-f]{16}\\.cpio\\.gz$`));
    for (const name of ['init', 'bin/busybox', 'dev/console', 'lib/modules/9p.ko', 'lib/modules/9pnet_virtio.ko', 'lib/modules/overlay.ko']) {
      expect(archive).toContain(`${name}\0`);
    }
    expect(archive).toContain('TRAILER!!!\0');
  });
});

describe('a guest booted under QEMU', () => {
  let guest: Guest;
  let keptDir: string;
  beforeAll(async () => {
    keptDir = join(await mkdtemp(join(tmpdir(), 'kernel-bed-kept-')), 'cache');
    guest = await bootGuest({ writableDirs: [keptDir] });
    console.info(`kernel test bed: ${guest.kernel.version} booted in ${Math.round(guest.bootMs)} ms`);
  });
  afterAll(async () => {
    await guest.stop();
    await rm(join(keptDir, '..'), { recursive: true, force: true });
  });

  it("runs Debian's kernel, not the host's, with the harness's 9p modules loaded", async () => {
    const run = await guest.run('uname -r; cut -d" " -f1 /proc/modules | sort');
    expect(run.exitCode).toBe(0);
    const [release, ...modules] = run.stdout.trim().split('\n');
    expect(release).toBe(guest.kernel.version);
    expect(modules).toEqual(expect.arrayContaining(['9p', '9pnet_virtio', 'overlay', 'virtio_pci']));
  });

  it("returns a command's exit code, stdout and stderr", async () => {
    const run = await guest.run('echo out; echo err >&2; exit 3');
    expect(run).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' });
  });

  it("runs the project's Node 24 from the host's root", async () => {
    const run = await guest.run(`cd ${process.cwd()} && node_modules/.bin/node -p 'process.versions.node.split(".")[0]'`);
    expect(run).toMatchObject({ exitCode: 0, stdout: '24\n' });
  });

  it('keeps what the guest writes in the guest, except in the work dir and the writable dirs', async () => {
    const marker = `dr-kernel-bed-${process.pid}`;
    const run = await guest.run(
      `set -e; echo x > /etc/${marker}; mkdir -p /lib/modules/x-${marker}; echo work > ${guest.workDir}/${marker}; echo kept > ${keptDir}/${marker}`,
    );
    expect(run.exitCode, run.stderr).toBe(0);
    await expect(readFile(`/etc/${marker}`)).rejects.toThrow(/ENOENT/);
    expect(await readFile(join(guest.workDir, marker), 'utf8')).toBe('work\n');
    expect(await readFile(join(keptDir, marker), 'utf8')).toBe('kept\n');
  });

  it('has a devtmpfs /dev, so device nodes created by modules appear', async () => {
    const run = await guest.run('grep " /dev " /proc/mounts; test -c /dev/null');
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toMatch(/^devtmpfs \/dev devtmpfs/);
  });

  // Last: a command past its limit kills the guest.
  it('kills QEMU by PID when a command runs past its limit', async () => {
    await expect(guest.run('sleep 60', { timeoutMs: 1_000 })).rejects.toThrow(/did not finish within 1s; QEMU \(pid \d+\) killed/);
    await expect(guest.run('true')).rejects.toThrow(/the guest is not running/);
    expect(() => process.kill(guest.pid, 0)).toThrow(/ESRCH/);
  });
});
