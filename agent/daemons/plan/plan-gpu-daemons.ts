import type { PciDevice } from '../../detect/pci-device.ts';

/** A daemon the agent runs from the driver root and supervises. */
export interface DaemonSpec {
  readonly name: string;
  /** argv, the program first (an absolute path the agent reaches). */
  readonly argv: readonly string[];
  /**
   * Set for a daemon that forks (nvidia-persistenced, nv-fabricmanager): its launcher exits 0 once
   * the daemon runs, and the daemon's pid is in this file. Unset: the started process is the daemon.
   */
  readonly pidFile?: string;
  /**
   * The directory the daemon writes its pid file and socket to, fixed in the daemon
   * (`/var/run/nvidia-persistenced`), and where NVIDIA's container toolkit looks for that socket in
   * the driver root (the same path inside the root). Before the daemon starts, the agent makes
   * `path` resolve into the root's copy at `inRoot`, so that the socket is in the published root.
   */
  readonly runDir?: DaemonRunDir;
}

export interface DaemonRunDir {
  /** As the agent and the daemon reach it (`<DAEMON_RUN_DIR>/nvidia-persistenced`). */
  readonly path: string;
  /** Inside the driver root (`/var/run/nvidia-persistenced`). */
  readonly inRoot: string;
}

/** NVIDIA's PCI vendor and the class NVSwitch reports: bridge (0x06), other (0x80). */
const NVIDIA_VENDOR = '0x10de';
const NVSWITCH_CLASS = '0x0680';

/** Pure: an NVSwitch (NVLink switch of HGX/DGX boards): NVIDIA's vendor id, bridge class "other". */
export function isNvSwitch(device: PciDevice): boolean {
  return device.vendor === NVIDIA_VENDOR && device.classCode.startsWith(NVSWITCH_CLASS);
}

/** The daemons a driver root can carry, as found in it (absolute paths the agent reaches; undefined when absent). */
export interface GpuDaemonBinaries {
  readonly persistenced: string | undefined;
  readonly fabricManager: string | undefined;
  /** Where libnvidia-cfg.so.1 is, for `nvidia-persistenced --nvidia-cfg-path`; undefined: persistenced looks itself. */
  readonly libraryDir: string | undefined;
  /** The fabric manager's configuration in the root (`/usr/share/nvidia/nvswitch/fabricmanager.cfg`), when present. */
  readonly fabricManagerConfig: string | undefined;
}

export type GpuDaemonPlan =
  | { readonly kind: 'run'; readonly daemons: readonly DaemonSpec[] }
  | { readonly kind: 'refuse'; readonly nvSwitches: readonly string[]; readonly message: string };

/** The daemons' own directories under the run directory (`/var/run`), fixed in each daemon: pid file and socket. */
export const PERSISTENCED_RUN_DIR = 'nvidia-persistenced';
export const FABRIC_MANAGER_RUN_DIR = 'nvidia-fabricmanager';
export const PERSISTENCED_PID_FILE = `${PERSISTENCED_RUN_DIR}/nvidia-persistenced.pid`;
export const FABRIC_MANAGER_PID_FILE = `${FABRIC_MANAGER_RUN_DIR}/nv-fabricmanager.pid`;
/**
 * Where NVIDIA's container toolkit looks for the daemons' sockets in a driver root, to mount them
 * into GPU containers: libnvidia-container's NV_PERSISTENCED_SOCKET and NV_FABRICMANAGER_SOCKET
 * (`_PATH_VARRUN "nvidia-persistenced/socket"`), resolved inside the root it is configured with.
 */
export const ROOT_RUN_DIR = '/var/run';

function runDirOf(runDir: string, own: string): DaemonRunDir {
  return { path: `${runDir}/${own}`, inRoot: `${ROOT_RUN_DIR}/${own}` };
}

/**
 * Pure: which daemons run beside a loaded GPU driver. Without a GPU served, none. With one:
 * nvidia-persistenced when the root has it (persistence mode on, as NVIDIA's driver container runs
 * it). NVSwitch devices need the fabric manager (without it CUDA fails on every GPU while the
 * driver looks loaded): run when the root has it, else a refusal naming the switches. `runDir`
 * is where the daemons write their pid files and sockets (`/var/run` in the container); each
 * daemon's own directory there is to resolve into the root's (`runDir` of each spec).
 */
export function planGpuDaemons(gpus: readonly PciDevice[], allDevices: readonly PciDevice[], found: GpuDaemonBinaries, runDir = '/var/run'): GpuDaemonPlan {
  if (gpus.length === 0) return { kind: 'run', daemons: [] };
  const switches = allDevices.filter(isNvSwitch).map((d) => d.address).sort();
  if (switches.length > 0 && found.fabricManager === undefined) {
    return { kind: 'refuse', nvSwitches: switches, message: `NVSwitch present, no fabric manager in the image (NVSwitch ${switches.join(', ')})` };
  }
  const daemons: DaemonSpec[] = [];
  if (found.persistenced !== undefined) {
    const cfg = found.libraryDir === undefined ? [] : [`--nvidia-cfg-path=${found.libraryDir}`];
    daemons.push({ name: 'nvidia-persistenced', argv: [found.persistenced, '--persistence-mode', ...cfg], pidFile: `${runDir}/${PERSISTENCED_PID_FILE}`, runDir: runDirOf(runDir, PERSISTENCED_RUN_DIR) });
  }
  if (switches.length > 0 && found.fabricManager !== undefined) {
    const cfg = found.fabricManagerConfig === undefined ? [] : ['-c', found.fabricManagerConfig];
    daemons.push({ name: 'nv-fabricmanager', argv: [found.fabricManager, ...cfg], pidFile: `${runDir}/${FABRIC_MANAGER_PID_FILE}`, runDir: runDirOf(runDir, FABRIC_MANAGER_RUN_DIR) });
  }
  return { kind: 'run', daemons };
}
