import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, cp, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { DriverRolloutError } from '../../shared/errors.ts';
import { pathExists, readTextIfExists } from '../../shared/fs/if-exists.ts';
import { DRIVER_ROOT_MANIFEST, parseDriverRootManifest } from '../../shared/driver-root-manifest.ts';
import type { Logger } from '../../shared/logger.ts';
import { mountsAt } from './mounts-at.ts';

/** The driver root could not be read, copied, mounted or unmounted; nothing else about the driver changed. */
export class DriverRootError extends DriverRolloutError {}

export interface DriverRootOptions {
  /** The root shipped in the image (`DRIVER_ROOT_DIR`), with its manifest. */
  readonly imageDir: string;
  /** Where the node's consumers look for it (`DRIVER_ROOT_PATH`, NVIDIA's `/run/nvidia/driver`). */
  readonly path: string;
  /** A host directory of the driver's own that outlives the pod: the published copies live here. */
  readonly storeDir: string;
  /** NVIDIA's `.driver-ctr-ready`, present only while the root is usable. */
  readonly readyMarker: string;
  /** Run chrooted in the published root; must exit 0 before the marker is written (`nvidia-smi`). */
  readonly check: readonly string[];
  /** `<sysfs>/module/<module>/refcnt` must exist before the marker is written (the module is live). */
  readonly sysModuleDir: string;
  readonly log: Logger;
  /** The mount table read (tests of a private namespace may point elsewhere). */
  readonly mountinfo?: string;
}

export type PublishOutcome = 'kept' | 'published' | 'replaced';

export interface DriverRoot {
  /**
   * The copy of the image's root that `publish` mounts (`storeDir/<sha256 of its manifest>`), made
   * now when missing: the daemons of the root write their pid files and sockets into it before it
   * is published (agent/daemons).
   */
  prepare(): Promise<string>;
  /**
   * Makes `path` show the image's root, once the driver is loaded and verified: a copy under
   * `storeDir` named by the manifest's sha256, bind-mounted read-only at `path` with the node's
   * /dev, /proc and /sys inside (as NVIDIA's driver container publishes its own `/`). A root that
   * is already the published one, whole (one read-only mount with the node's trees inside), stays
   * mounted (`kept`: a restarted agent, the 30 s re-check); anything else mounted there (another
   * version, a copy that is gone, a stack or a half-made mount left by a killed agent) is
   * unmounted first (`replaced`), and other copies are removed. Then writes the ready
   * marker when `module` (the driver's first, `nvidia`) is live and the check passes (checked
   * until it once passes).
   */
  publish(module: string): Promise<PublishOutcome>;
  /** Before an unload: the marker goes (the driver is about to go), the root stays until the next one is verified. */
  withdrawReady(): Promise<void>;
  /** After the driver was unloaded or uninstalled: marker, mounts and copies go. */
  release(): Promise<void>;
}

const CHECK_TIMEOUT_MS = 60_000;
/** The node's trees a chroot into the root needs, as NVIDIA's `mount --rbind / /run/nvidia/driver` brings them. */
const SYSTEM_MOUNTS = ['dev', 'proc', 'sys'] as const;

export function createDriverRoot(options: DriverRootOptions): DriverRoot {
  const { log } = options;
  let checked = false;

  async function readManifest(dir: string): Promise<string | undefined> {
    return readTextIfExists(join(dir, DRIVER_ROOT_MANIFEST));
  }

  async function imageManifest(): Promise<string> {
    const text = await readManifest(options.imageDir);
    if (text === undefined) throw new DriverRootError(`the image's driver root ${options.imageDir} has no ${DRIVER_ROOT_MANIFEST}`, { dir: options.imageDir });
    const parsed = parseDriverRootManifest(text);
    if (typeof parsed === 'string') throw new DriverRootError(`the image's driver root manifest ${join(options.imageDir, DRIVER_ROOT_MANIFEST)} is invalid: ${parsed}`, { dir: options.imageDir });
    return text;
  }

  /** The copy of the image's root under storeDir, made once per manifest. */
  async function ensureCopy(manifest: string): Promise<string> {
    const dir = join(options.storeDir, copyName(manifest));
    if (await pathExists(join(dir, DRIVER_ROOT_MANIFEST))) return dir;
    const partial = `${dir}.partial`;
    await rm(partial, { recursive: true, force: true });
    await mkdir(options.storeDir, { recursive: true });
    try {
      await cp(options.imageDir, partial, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
      await rename(partial, dir);
    } catch (error) {
      await rm(partial, { recursive: true, force: true });
      throw new DriverRootError(`cannot copy the driver root ${options.imageDir} to ${dir}`, { dir }, { cause: error });
    }
    return dir;
  }

  async function unmountAll(): Promise<boolean> {
    let any = false;
    // Stacked mounts (a killed agent's over an older one) come off one by one; lazily, so
    // processes with files open in the old root keep them.
    for (let n = 0; n < 16 && (await mountsAt(options.path, options.mountinfo)).length > 0; n++) {
      any = true;
      await run('umount', ['--recursive', '--lazy', options.path]);
    }
    if ((await mountsAt(options.path, options.mountinfo)).length > 0) throw new DriverRootError(`${options.path} is still mounted after 16 unmounts`, { path: options.path });
    return any;
  }

  async function mount(copy: string): Promise<void> {
    await mkdir(options.path, { recursive: true });
    await run('mount', ['--bind', copy, options.path]);
    await run('mount', ['-o', 'remount,bind,ro', options.path]);
    for (const dir of SYSTEM_MOUNTS) await run('mount', ['--rbind', `/${dir}`, join(options.path, dir)]);
  }

  /**
   * Whether the root at the path is whole as `mount` makes it: one mount, read-only, with the node's
   * trees bound inside. An agent killed between those mounts leaves less.
   */
  async function isWhole(mounted: readonly number[]): Promise<boolean> {
    if (mounted.length !== 1) return false;
    for (const dir of SYSTEM_MOUNTS) if ((await mountsAt(join(options.path, dir), options.mountinfo)).length === 0) return false;
    return (await access(options.path, constants.W_OK).then(() => 'writable', (error: unknown) => (error as NodeJS.ErrnoException).code)) === 'EROFS';
  }

  async function removeOtherCopies(keep: string | undefined): Promise<void> {
    const entries = await readdir(options.storeDir).catch(() => [] as string[]);
    for (const name of entries) if (name !== keep) await rm(join(options.storeDir, name), { recursive: true, force: true });
  }

  async function updateMarker(module: string): Promise<void> {
    if (!(await pathExists(join(options.sysModuleDir, module, 'refcnt')))) {
      await withdrawMarker();
      return;
    }
    if (checked && (await pathExists(options.readyMarker))) return;
    if (options.check.length > 0) {
      const result = await execa('chroot', [options.path, ...options.check], { reject: false, timeout: CHECK_TIMEOUT_MS, all: true });
      if (result.exitCode !== 0) {
        log.warn({ command: options.check.join(' '), exitCode: result.exitCode, output: result.all.slice(-2000) }, 'the driver root check failed: not ready for its consumers');
        await withdrawMarker();
        return;
      }
    }
    await mkdir(join(options.readyMarker, '..'), { recursive: true });
    await writeFile(options.readyMarker, '');
    if (!checked) log.info({ marker: options.readyMarker }, 'driver root ready for its consumers');
    checked = true;
  }

  async function withdrawMarker(): Promise<void> {
    checked = false;
    await rm(options.readyMarker, { force: true });
  }

  return {
    async prepare() {
      return ensureCopy(await imageManifest());
    },

    async publish(module) {
      const manifest = await imageManifest();
      const mounted = await mountsAt(options.path, options.mountinfo);
      const shown = mounted.length === 1 ? await readManifest(options.path).catch(() => undefined) : undefined;
      let outcome: PublishOutcome = 'kept';
      if (shown !== manifest || !(await isWhole(mounted))) {
        const copy = await ensureCopy(manifest);
        await withdrawMarker();
        const replaced = await unmountAll();
        await mount(copy);
        outcome = replaced ? 'replaced' : 'published';
        log.info({ path: options.path, copy, replaced: mounted.length }, `driver root ${outcome} at ${options.path}`);
      }
      await removeOtherCopies(copyName(manifest));
      await updateMarker(module);
      return outcome;
    },

    withdrawReady: withdrawMarker,

    async release() {
      await withdrawMarker();
      if (await unmountAll()) log.info({ path: options.path }, 'driver root unpublished');
      await rm(options.storeDir, { recursive: true, force: true });
    },
  };
}

/** The copy's directory name under storeDir: one per manifest. */
function copyName(manifest: string): string {
  return createHash('sha256').update(manifest).digest('hex').slice(0, 32);
}

async function run(command: string, args: readonly string[]): Promise<void> {
  const result = await execa(command, args, { reject: false, all: true, timeout: CHECK_TIMEOUT_MS });
  if (result.exitCode !== 0) {
    throw new DriverRootError(`${command} ${args.join(' ')} failed: ${result.all.trim() || `exit ${String(result.exitCode)}`}`, { command, args, exitCode: result.exitCode });
  }
}
