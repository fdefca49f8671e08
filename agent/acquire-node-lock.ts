import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { lock } from 'proper-lockfile';
import { abortableSleep, abortReason } from '../shared/abortable-sleep.ts';
import { DriverRolloutError } from '../shared/errors.ts';

/** Another agent holds the node lock and the wait was abandoned (SIGTERM). */
export class NodeLockError extends DriverRolloutError {}

export interface NodeLockOptions {
  readonly path: string;
  readonly signal: AbortSignal;
  /** Called once per failed try while another agent holds the lock. */
  readonly onWaiting: (error: Error) => void;
  /** The lock was lost (its directory removed or not refreshed in time): stop touching the kernel. */
  readonly onCompromised: (error: Error) => void;
  readonly retryMs?: number;
}

/**
 * One agent per node and driver: a lock directory on a host path (proper-lockfile: `mkdir` is
 * atomic, and the holder refreshes its mtime). A holder that died without releasing it (SIGKILL,
 * node crash with a persistent path) is taken over once its lock is `stale` ms old, so a crashed
 * agent never blocks its successor for long. Waits until the lock is free or `signal` aborts.
 */
export async function acquireNodeLock(options: NodeLockOptions): Promise<() => Promise<void>> {
  await mkdir(dirname(options.path), { recursive: true });
  for (;;) {
    try {
      return await lock(options.path, {
        realpath: false,
        lockfilePath: options.path,
        stale: 15_000,
        update: 5_000,
        onCompromised: options.onCompromised,
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') {
        throw new NodeLockError(`cannot take the node lock ${options.path}`, { path: options.path }, { cause: error });
      }
      options.onWaiting(error as Error);
      if ((await abortableSleep(options.retryMs ?? 2_000, options.signal)) === 'aborted') {
        throw new NodeLockError(`gave up waiting for the node lock ${options.path}`, { path: options.path }, { cause: abortReason(options.signal) });
      }
    }
  }
}
