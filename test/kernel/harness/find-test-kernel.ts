import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isReadable } from './is-readable.ts';
import { KernelTestBedError } from './kernel-test-bed-error.ts';

/** A kernel the guest can boot and the host can build modules for. */
export interface TestKernel {
  readonly version: string;
  /** /boot/vmlinuz-<version> */
  readonly image: string;
  /** /lib/modules/<version>: the kernel's own modules (the guest's 9p and virtio drivers). */
  readonly modulesDir: string;
  /** The kbuild tree for out-of-tree modules (/lib/modules/<version>/build). */
  readonly buildDir: string;
  /** The QEMU binary that boots it. */
  readonly qemu: string;
}

const QEMU = 'qemu-system-x86_64';

/** Where to look; the defaults are the Debian locations. */
export interface KernelLocations {
  readonly bootDir?: string;
  readonly modulesRoot?: string;
  /**
   * Where `<version>/build` (the headers) is looked up; defaults to `modulesRoot`. A kernel
   * package unpacked outside / (modulesRoot in its tree) still has its headers installed in
   * /lib/modules/<version>/build.
   */
  readonly headersRoot?: string;
  readonly qemuCommand?: string;
}
const PACKAGES = 'qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static kmod';

/**
 * The newest kernel with an image in /boot, its modules and its headers all installed, plus
 * QEMU. The host's running kernel is irrelevant (CI machines run a newer one): the guest boots
 * Debian's packaged kernel and modules are built against that kernel's headers.
 * Fails with every reason when nothing fits, naming the Debian packages to install.
 */
export async function findTestKernel(where: KernelLocations = {}): Promise<TestKernel> {
  const { bootDir = '/boot', modulesRoot = '/lib/modules', qemuCommand = QEMU } = where;
  const headersRoot = where.headersRoot ?? modulesRoot;
  const qemu = await findOnPath(qemuCommand);
  const problems: string[] = [];
  if (qemu === undefined) problems.push(`${qemuCommand} is not on PATH`);
  const versions = (await listOr(bootDir))
    .filter((f) => f.startsWith('vmlinuz-'))
    .map((f) => f.slice('vmlinuz-'.length))
    .sort(compareVersions)
    .reverse();
  if (versions.length === 0) problems.push(`no kernel image ${bootDir}/vmlinuz-*`);
  for (const version of versions) {
    const kernel = {
      version,
      image: join(bootDir, `vmlinuz-${version}`),
      modulesDir: join(modulesRoot, version),
      buildDir: join(headersRoot, version, 'build'),
      qemu: qemu ?? qemuCommand,
    };
    const missing = await missingParts(kernel);
    if (missing.length === 0 && qemu !== undefined) return kernel;
    problems.push(...missing.map((m) => `${version}: ${m}`));
  }
  throw new KernelTestBedError(
    `no kernel to boot under QEMU: ${problems.join('; ')} (install the Debian packages ${PACKAGES})`,
    { problems, bootDir, modulesRoot },
  );
}

async function missingParts(kernel: TestKernel): Promise<string[]> {
  const checks: [string, string][] = [
    [kernel.image, `kernel image ${kernel.image} is missing or unreadable`],
    [join(kernel.modulesDir, 'modules.dep'), `modules of ${kernel.version} are not installed (${kernel.modulesDir}/modules.dep)`],
    [join(kernel.buildDir, 'Makefile'), `headers of ${kernel.version} are not installed (${kernel.buildDir})`],
  ];
  const missing: string[] = [];
  for (const [path, reason] of checks) {
    if (!(await isReadable(path))) missing.push(reason);
  }
  return missing;
}

async function findOnPath(command: string): Promise<string | undefined> {
  try {
    const { stdout } = await promisify(execFile)('sh', ['-c', 'command -v "$1"', 'sh', command]);
    const path = stdout.trim();
    return path === '' ? undefined : path;
  } catch {
    return undefined;
  }
}

async function listOr(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/** Orders "6.1.0-56-amd64" before "6.1.0-100-amd64": numeric runs compare as numbers. */
export function compareVersions(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}
