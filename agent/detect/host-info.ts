import { execa } from 'execa';
import { osInfo } from 'systeminformation';
import { DriverRolloutError } from '../../shared/errors.ts';

/** What the build needs to know about the host: the running kernel and the distribution. */
export interface HostInfo {
  /** `uname -r` of the running kernel, e.g. `6.1.0-56-amd64`. */
  readonly kernelRelease: string;
  /** Distribution id from os-release (`debian`, `ubuntu`, `rhel`), lower case; `unknown` if none. */
  readonly distro: string;
  readonly distroRelease: string;
  readonly arch: string;
}

/** Port: reads the host. The real adapter asks the system; tests pass a fixed value. */
export interface HostInfoPort {
  readHostInfo(): Promise<HostInfo>;
}

export class HostInfoError extends DriverRolloutError {}

/**
 * The real adapter. The kernel is shared by every container, so `uname -r` in the agent's
 * container is the node's kernel. The distribution is read by systeminformation from
 * `/etc/os-release`, which in a container is the image's: the DaemonSet mounts the host's
 * file over it so this names the node's OS.
 */
export function systemHostInfo(): HostInfoPort {
  return {
    async readHostInfo() {
      let kernelRelease: string;
      try {
        kernelRelease = (await execa('uname', ['-r'])).stdout.trim();
      } catch (error) {
        throw new HostInfoError('cannot read the running kernel with uname -r', {}, { cause: error });
      }
      const os = await osInfo();
      return {
        kernelRelease,
        distro: distroId(os.logofile, os.distro),
        distroRelease: os.release,
        arch: os.arch,
      };
    },
  };
}

/** In-memory adapter for tests and the out-of-cluster demo. */
export function fixedHostInfo(info: HostInfo): HostInfoPort {
  return { readHostInfo: () => Promise.resolve(info) };
}

/**
 * systeminformation's `logofile` is its short id for the distribution (`debian`, `ubuntu`,
 * `redhat`); `distro` is the pretty name (`Debian GNU/Linux`), used when there is no id.
 */
function distroId(id: string, pretty: string): string {
  if (id.trim() !== '') return id.trim().toLowerCase();
  const first = pretty.trim().split(/\s+/)[0]?.toLowerCase();
  return first === undefined || first === '' ? 'unknown' : first;
}
