import { toError } from '../../shared/errors.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import type { RolloutRef } from '../plan/snapshot.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';
import { isSameJson } from '../status/stored-status.ts';
import { withTimeout } from '../with-timeout.ts';

/** A status patch that hangs fails after this; the next pass writes again. */
export const STATUS_PATCH_TIMEOUT_MS = 30_000;

/**
 * Least time between the starts of two status writes of one rollout (submit). During a large
 * rollout nearly every pass changes the status (counts, the first nodes waiting); written as
 * computed, that would be a patch for most upgraded nodes. The latest status always goes out, at
 * most this much later.
 */
export const STATUS_MIN_INTERVAL_MS = 1_000;

interface Submitted {
  readonly ref: RolloutRef;
  readonly status: Record<string, unknown>;
  readonly signal: AbortSignal;
  /** Run once this status, or a later one that replaced it before it went out, is stored. */
  readonly afterWritten: (() => void)[];
  readonly onFailed: (error: Error) => void;
}

/**
 * Writes DriverRollout statuses, remembering what this replica last wrote per uid: a status the
 * API server prunes (a schema missing a field) must not be rewritten on every pass, each write
 * waking the next pass. Forget everything at a new leadership term (`clear`).
 *
 * A pass's status goes out beside the passes (`submit`): one write per rollout at a time, at
 * most one starting per `minIntervalMs` (STATUS_MIN_INTERVAL_MS), and of the statuses submitted
 * meanwhile only the latest, so a slow status patch holds back no pass and the last status
 * computed is the last one written.
 */
export class RolloutStatusWriter {
  readonly #writer: ClusterWriter;
  readonly #minIntervalMs: number;
  readonly #now: () => number;
  readonly #lastWritten = new Map<string, unknown>();
  /** Per uid: the status being written, and the latest one waiting for it. */
  readonly #inFlight = new Map<string, { readonly submitted: Submitted; readonly done: Promise<void> }>();
  readonly #waiting = new Map<string, Submitted>();
  /** Per uid: when its last submitted write started, and, while the one waiting is held back, when it goes. */
  readonly #startedAt = new Map<string, number>();
  readonly #held = new Map<string, { readonly timer: NodeJS.Timeout; readonly fired: Promise<void> }>();

  constructor(writer: ClusterWriter, options: { readonly minIntervalMs?: number; readonly now?: () => number } = {}) {
    this.#writer = writer;
    this.#minIntervalMs = options.minIntervalMs ?? STATUS_MIN_INTERVAL_MS;
    this.#now = options.now ?? Date.now;
  }

  /**
   * This replica's newest status for the rollout (waiting, being written, or last written this
   * term); else the stored one. The stored one may lag behind what was written (not seen yet) or
   * miss fields the API server pruned.
   */
  previousStatus(rollout: DriverRolloutObject): unknown {
    const uid = rollout.metadata?.uid ?? '';
    const ours = this.#waiting.get(uid)?.status ?? this.#inFlight.get(uid)?.submitted.status ?? this.#lastWritten.get(uid);
    return ours ?? rollout.status;
  }

  /**
   * Whether an informer event shows the rollout with nothing new but the status this replica
   * wrote last: the same generation as that status observed, not being deleted. Planning again
   * would only compute that status once more.
   */
  isOwnEcho(rollout: DriverRolloutObject): boolean {
    const written = this.#lastWritten.get(rollout.metadata?.uid ?? '') as { observedGeneration?: unknown } | undefined;
    return (
      written !== undefined &&
      rollout.metadata?.deletionTimestamp === undefined &&
      rollout.metadata?.generation === written.observedGeneration &&
      isSameJson(rollout.status, written)
    );
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

  /**
   * Writes `status` (the caller compared it with previousStatus) beside the passes: at once when
   * no write of this rollout is under way, else after it, replacing any status still waiting
   * (whose `afterWritten` then runs after this one). Nothing goes out once `signal` has aborted.
   * A failed write is not retried here: `onFailed` hears of it, and the next pass computes the
   * status again (previousStatus no longer shows the failed one).
   */
  submit(rollout: DriverRolloutObject, ref: RolloutRef, status: Record<string, unknown>, options: { signal: AbortSignal; afterWritten?: () => void; onFailed: (error: Error) => void }): void {
    const uid = rollout.metadata?.uid ?? '';
    const replaced = this.#waiting.get(uid);
    this.#waiting.set(uid, {
      ref,
      status,
      signal: options.signal,
      afterWritten: [...(replaced?.afterWritten ?? []), ...(options.afterWritten === undefined ? [] : [options.afterWritten])],
      onFailed: options.onFailed,
    });
    this.#pump(uid);
  }

  /**
   * Resolves once no status write is under way or held back for the interval. A held one whose
   * term has ended (its signal aborted) is dropped at once: it would never go out.
   */
  async idle(): Promise<void> {
    for (;;) {
      for (const [uid, held] of this.#held) {
        if (this.#waiting.get(uid)?.signal.aborted === false) continue;
        clearTimeout(held.timer);
        this.#held.delete(uid);
        this.#waiting.delete(uid);
      }
      if (this.#inFlight.size === 0 && this.#held.size === 0) return;
      await Promise.all([...[...this.#inFlight.values()].map((w) => w.done), ...[...this.#held.values()].map((h) => h.fired)]);
    }
  }

  clear(): void {
    this.#lastWritten.clear();
    this.#waiting.clear();
  }

  #pump(uid: string): void {
    if (this.#inFlight.has(uid) || this.#held.has(uid)) return;
    const next = this.#waiting.get(uid);
    if (next === undefined) return;
    if (next.signal.aborted) {
      this.#waiting.delete(uid);
      return;
    }
    const holdMs = (this.#startedAt.get(uid) ?? Number.NEGATIVE_INFINITY) + this.#minIntervalMs - this.#now();
    if (holdMs > 0) {
      let release = (): void => undefined;
      const fired = new Promise<void>((resolve) => {
        release = resolve;
      });
      const timer = setTimeout(() => {
        this.#held.delete(uid);
        this.#pump(uid);
        release();
      }, holdMs);
      this.#held.set(uid, { timer, fired });
      return;
    }
    this.#waiting.delete(uid);
    this.#startedAt.set(uid, this.#now());
    // An adapter that throws instead of rejecting fails the write all the same.
    const patch = (async () => this.#writer.patchRolloutStatus(next.ref.namespace, next.ref.name, next.status))();
    const done = withTimeout(patch, STATUS_PATCH_TIMEOUT_MS, 'status patch').then(
      () => {
        this.#lastWritten.set(uid, next.status);
        for (const after of next.afterWritten) after();
      },
      (error: unknown) => {
        // What was to follow this status must not be lost with it: the one waiting carries it.
        const waiting = this.#waiting.get(uid);
        if (waiting !== undefined) waiting.afterWritten.unshift(...next.afterWritten);
        next.onFailed(toError(error));
      },
    ).finally(() => {
      this.#inFlight.delete(uid);
      this.#pump(uid);
    });
    this.#inFlight.set(uid, { submitted: next, done });
  }
}
