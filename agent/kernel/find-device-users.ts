import { readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { readTextIfExists } from '../../shared/fs/if-exists.ts';

/** A process holding one of the driver's device files open: what pins the module's refcnt. */
export interface DeviceUser {
  readonly pid: number;
  /** /proc/<pid>/comm. */
  readonly command: string;
  readonly files: readonly string[];
  /** The Kubernetes pod's UID when the process runs in a pod (from its cgroup path). */
  readonly podUid: string | undefined;
}

/**
 * Processes with an open file descriptor on a path starting with one of `devicePrefixes`
 * (e.g. `/dev/nvidia`, `/dev/infiniband/`). Scans `<procDir>/<pid>/fd/*` links, so the agent
 * must see the host's processes (hostPID) to name users in other pods. Processes that exit or
 * cannot be inspected during the scan are skipped.
 */
export async function findDeviceUsers(procDir: string, devicePrefixes: readonly string[]): Promise<DeviceUser[]> {
  if (devicePrefixes.length === 0) return [];
  const users: DeviceUser[] = [];
  for (const entry of await readdir(procDir)) {
    if (!/^\d+$/.test(entry)) continue;
    const files = await openDeviceFiles(join(procDir, entry), devicePrefixes);
    if (files.length === 0) continue;
    users.push({
      pid: Number(entry),
      command: (await readOrUndefined(join(procDir, entry, 'comm')))?.trim() ?? '?',
      files,
      podUid: podUidFromCgroup((await readOrUndefined(join(procDir, entry, 'cgroup'))) ?? ''),
    });
  }
  return users.sort((a, b) => a.pid - b.pid);
}

/** One line per process, for DriverInUseError messages. */
export function describeDeviceUsers(users: readonly DeviceUser[]): string {
  return users
    .map((u) => `pid ${u.pid} (${u.command}${u.podUid === undefined ? '' : `, pod ${u.podUid}`}) has ${u.files.join(', ')} open`)
    .join('; ');
}

/**
 * The pod UID in a kubelet cgroup path: cgroupfs `/kubepods/burstable/pod<uid>/<container>` or
 * systemd `kubepods-burstable-pod<uid_with_underscores>.slice`.
 */
export function podUidFromCgroup(cgroup: string): string | undefined {
  const match = /pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})/.exec(cgroup);
  return match?.[1]?.replaceAll('_', '-');
}

async function openDeviceFiles(processDir: string, prefixes: readonly string[]): Promise<string[]> {
  let fds: string[];
  try {
    fds = await readdir(join(processDir, 'fd'));
  } catch {
    return [];
  }
  const files = new Set<string>();
  for (const fd of fds) {
    const target = await readlink(join(processDir, 'fd', fd)).catch(() => undefined);
    if (target !== undefined && prefixes.some((p) => target.startsWith(p))) files.add(target);
  }
  return [...files].sort();
}

/** A process that exits during the scan loses its /proc entries (ENOENT, ESRCH); one we may not read is skipped. */
function readOrUndefined(path: string): Promise<string | undefined> {
  return readTextIfExists(path, { alsoCodes: ['ESRCH', 'EACCES'] });
}
