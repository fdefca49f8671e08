import type { KubernetesObject } from '@kubernetes/client-node';
import { untilAborted } from '../../shared/abortable-sleep.ts';
import type { Logger } from '../../shared/logger.ts';
import type { AskAlertGate } from '../alerts/ask-alert-gate.ts';
import type { CacheKind, ClusterCaches } from '../cluster/cluster-caches.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import type { CoordinatorMetrics } from '../metrics/coordinator-metrics.ts';
import { reconcilePass, type PassDeps, type Planner } from './reconcile-pass.ts';
import { createReconcilerMemory } from './reconciler-memory.ts';

export type { Planner } from './reconcile-pass.ts';

export interface ReconcilerDeps {
  readonly caches: ClusterCaches;
  readonly writer: ClusterWriter;
  readonly plan: Planner;
  readonly metrics: CoordinatorMetrics;
  readonly logger: Logger;
  readonly now?: () => number;
  /** Triggers within this window are handled by one pass. */
  readonly debounceMs?: number;
  /** Nodes the executor works on at once. */
  readonly concurrency?: number;
  /** Least time between two status writes of one rollout (RolloutStatusWriter; STATUS_MIN_INTERVAL_MS). */
  readonly statusMinIntervalMs?: number;
  /**
   * Asks a rollout's alert gate (alerts/ask-alert-gate.ts), polled while leading. Absent: gates
   * are never asked, so a rollout with spec.alertGate starts no node (the gate fails closed).
   */
  readonly askAlertGate?: AskAlertGate;
}

export interface Reconciler {
  /** Call on every cache change; cheap, coalesced. */
  trigger(): void;
  /**
   * Whether a change to this object can matter to a plan. Pods matter only on nodes some
   * DriverRollout manages (as of the last pass) or when a DaemonSet owns them (a driver pod,
   * maybe on a new node): on a large cluster most pod churn is elsewhere and wakes nothing.
   */
  isRelevant(kind: CacheKind, object?: KubernetesObject): boolean;
  /** The leader's loop: passes until `signal` aborts; resolves once no write is in flight. */
  run(signal: AbortSignal): Promise<void>;
}

/**
 * The coordinator's loop: on a cache change (debounced) or at the earliest deadline any plan
 * named, it runs one pass (reconcile-pass.ts). Passes never overlap. Its memory between passes is
 * one record (reconciler-memory.ts); nothing decided here survives a restart except what the
 * executor wrote to the cluster.
 */
export function createReconciler(deps: ReconcilerDeps): Reconciler {
  const now = deps.now ?? Date.now;
  const concurrency = deps.concurrency ?? 32;
  const memory = createReconcilerMemory({ writer: deps.writer, now, debounceMs: deps.debounceMs ?? 20, concurrency, statusMinIntervalMs: deps.statusMinIntervalMs, askAlertGate: deps.askAlertGate, logger: deps.logger });
  const passDeps: PassDeps = { caches: deps.caches, writer: deps.writer, plan: deps.plan, metrics: deps.metrics, logger: deps.logger, now, concurrency };
  const { wake, writtenNodes, statuses } = memory;
  return {
    trigger: () => {
      wake.trigger();
    },
    isRelevant: (kind, object) => {
      // This replica's own writes coming back through the informers wake nothing: the pass after
      // a node's plan is answered already plans on what was written, and a status it wrote needs
      // no pass. The object must still be in the cache (a deletion always matters).
      if (kind === 'nodes' && object !== undefined && deps.caches.nodes.get('', object.metadata?.name ?? '') === object && writtenNodes.isOwnEcho(object)) return false;
      if (kind === 'driverrollouts' && object !== undefined && deps.caches.rollouts.get(object.metadata?.namespace ?? '', object.metadata?.name ?? '') === object && statuses.isOwnEcho(object)) return false;
      return memory.relevance.isRelevant(kind, object);
    },
    async run(signal) {
      await Promise.race([deps.caches.synced, untilAborted(signal)]);
      // A new term: another replica may have written since; trust only what the caches show.
      statuses.clear();
      memory.evictions.clear();
      memory.deletedPods.clear();
      try {
        while (!signal.aborted) {
          // On the reconciler's clock (the tests' fake one: their passes take no time).
          const started = now();
          await reconcilePass(passDeps, memory, signal);
          wake.pace(now() - started);
          await wake.wait(signal);
        }
      } finally {
        // Plans under way finish (each starts nothing more once the term's signal aborted).
        await memory.inFlight.idle();
        await statuses.idle();
        while (memory.eventsBeside.size > 0) await Promise.all(memory.eventsBeside);
        wake.dispose();
        writtenNodes.clear();
        // A new term asks afresh (from a reading younger than an interval, else holding until its first answer).
        memory.alertGates?.clear();
      }
    },
  };
}
