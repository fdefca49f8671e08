import type { ClusterWriter } from '../execute/cluster-writer.ts';
import type { RolloutRef } from '../plan/snapshot.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';
import { isSameJson } from '../status/stored-status.ts';
import { withTimeout } from '../with-timeout.ts';

/** A status patch that hangs fails after this; the next pass writes again. */
export const STATUS_PATCH_TIMEOUT_MS = 30_000;

/**
 * Writes DriverRollout statuses, remembering what this replica last wrote per uid: a status the
 * API server prunes (a schema missing a field) must not be rewritten on every pass, each write
 * waking the next pass. Forget everything at a new leadership term (`clear`).
 */
export class RolloutStatusWriter {
  readonly #writer: ClusterWriter;
  readonly #lastWritten = new Map<string, unknown>();

  constructor(writer: ClusterWriter) {
    this.#writer = writer;
  }

  /** The stored status, or what we last wrote when the stored one has no conditions (not seen yet, or pruned). */
  previousStatus(rollout: DriverRolloutObject): unknown {
    const stored = rollout.status as { conditions?: unknown } | undefined;
    return Array.isArray(stored?.conditions) ? stored : this.#lastWritten.get(rollout.metadata?.uid ?? '');
  }

  /**
   * Patches `next` unless it equals `stored` or what was last written; bounded by
   * STATUS_PATCH_TIMEOUT_MS. Resolves whether it wrote.
   */
  async write(rollout: DriverRolloutObject, ref: RolloutRef, stored: unknown, next: object): Promise<boolean> {
    const uid = rollout.metadata?.uid ?? '';
    if (isSameJson(stored, next) || isSameJson(this.#lastWritten.get(uid), next)) return false;
    await withTimeout(this.#writer.patchRolloutStatus(ref.namespace, ref.name, next as Record<string, unknown>), STATUS_PATCH_TIMEOUT_MS, 'status patch');
    this.#lastWritten.set(uid, next);
    return true;
  }

  /** Patches `status` as computed for this pass (the caller compared it with the stored one); bounded like `write`. */
  async patch(ref: RolloutRef, status: Record<string, unknown>): Promise<void> {
    await withTimeout(this.#writer.patchRolloutStatus(ref.namespace, ref.name, status), STATUS_PATCH_TIMEOUT_MS, 'status patch');
  }

  clear(): void {
    this.#lastWritten.clear();
  }
}
