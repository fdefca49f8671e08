import { join } from 'node:path';
import type { BackoffPolicy } from '../../shared/backoff.ts';
import { pathExists } from '../../shared/fs/if-exists.ts';
import type { Logger } from '../../shared/logger.ts';
import type { PciDevice } from '../detect/pci-device.ts';
import { readPciDevices } from '../detect/read-pci-devices.ts';
import { findBinary, findLibraryDir } from '../user-space/read-user-space-versions.ts';
import { DaemonFailedError, FabricManagerMissingError } from './daemon-errors.ts';
import { linkRunDir } from './link-run-dir.ts';
import { planGpuDaemons, type GpuDaemonBinaries } from './plan/plan-gpu-daemons.ts';
import { superviseDaemon, type DaemonSupervisor } from './supervise-daemon.ts';

export interface GpuDaemonsOptions {
  /** The driver root the daemons come from (the image's user space). */
  readonly root: string;
  readonly sysfsRoot: string;
  /** Where the daemons write their pid files and sockets (`/var/run`). */
  readonly runDir: string;
  readonly restart: BackoffPolicy;
  readonly pollMs: number;
  readonly stopTimeoutMs: number;
  readonly random: () => number;
  readonly log: Logger;
}

/** The GPU's daemons beside the loaded driver: nvidia-persistenced, and the fabric manager on NVSwitch systems. */
export interface GpuDaemons {
  /**
   * After a verified load: starts the daemons the root carries (once; again after stop()), then
   * throws FabricManagerMissingError on an NVSwitch system without one, DaemonFailedError while a
   * daemon is down (being restarted). Resolves the names of the supervised daemons.
   * `publishedRoot`: the copy of the driver root that is or is about to be published
   * (DriverRoot.prepare); before a daemon starts, its run dir is made to resolve into it, so that
   * its socket is where the container toolkit looks in the published root. None: the daemons
   * write into the run dir as it is.
   */
  ensureRunning(gpus: readonly PciDevice[], publishedRoot?: string): Promise<readonly string[]>;
  /** Before an unload (they hold the device files) and on unload at stop: stops them all. */
  stop(): Promise<void>;
  /** Whether any daemon is supervised now (then the driver's device files may be held by them). */
  supervising(): boolean;
}

const FABRIC_MANAGER_CONFIG = 'usr/share/nvidia/nvswitch/fabricmanager.cfg';

export function createGpuDaemons(options: GpuDaemonsOptions): GpuDaemons {
  let supervisors: DaemonSupervisor[] | undefined;
  return {
    async ensureRunning(gpus, publishedRoot) {
      if (supervisors === undefined) {
        const plan = planGpuDaemons(gpus, await readPciDevices(options.sysfsRoot), await findDaemonBinaries(options.root), options.runDir);
        if (plan.kind === 'refuse') throw new FabricManagerMissingError(plan.message, { nvSwitches: plan.nvSwitches });
        if (publishedRoot !== undefined) {
          for (const spec of plan.daemons) {
            if (spec.runDir !== undefined) options.log.info({ daemon: spec.name, runDir: spec.runDir.path, in: await linkRunDir(spec.runDir, publishedRoot) }, 'daemon run dir inside the driver root');
          }
        }
        supervisors = plan.daemons.map((spec) =>
          superviseDaemon({ spec, restart: options.restart, random: options.random, pollMs: options.pollMs, stopTimeoutMs: options.stopTimeoutMs, log: options.log }),
        );
      }
      for (const s of supervisors) {
        const health = s.health();
        if (health.state === 'failed') throw new DaemonFailedError({ daemon: s.name, restarts: health.restarts, lastFailure: health.lastFailure });
      }
      return supervisors.map((s) => s.name);
    },
    async stop() {
      const stopping = supervisors ?? [];
      supervisors = undefined;
      for (const s of stopping.toReversed()) await s.stop();
    },
    supervising: () => (supervisors?.length ?? 0) > 0,
  };
}

/** What of the daemons the root carries. */
export async function findDaemonBinaries(root: string): Promise<GpuDaemonBinaries> {
  const [persistenced, fabricManager, cfgDir] = await Promise.all([findBinary(root, 'nvidia-persistenced'), findBinary(root, 'nv-fabricmanager'), findLibraryDir(root, 'libnvidia-cfg.so.1')]);
  const config = join(root, FABRIC_MANAGER_CONFIG);
  return {
    persistenced: persistenced?.path,
    fabricManager: fabricManager?.path,
    libraryDir: cfgDir?.path,
    fabricManagerConfig: (await pathExists(config)) ? config : undefined,
  };
}
