import type { KubernetesObject } from '@kubernetes/client-node';
import { untilAborted } from '../../shared/abortable-sleep.ts';
import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { buildSnapshot } from '../cluster/build-snapshot.ts';
import { BY_NODE, type CacheKind, type ClusterCaches } from '../cluster/cluster-caches.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import type { ExecuteHooks } from '../execute/execute-plan.ts';
import { NodePlansInFlight } from '../execute/node-plans-in-flight.ts';
import type { CoordinatorMetrics } from '../metrics/coordinator-metrics.ts';
import type { Plan } from '../plan/action.ts';
import { applyActions } from '../plan/apply-actions.ts';
import type { ClusterSnapshot, RolloutRef } from '../plan/snapshot.ts';
import { DRIVER_ROLLOUT_API_VERSION, type DriverRolloutPolicy, type ParseResult } from '../policy/driver-rollout-spec.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';
import { invalidSpecConditions, invalidSpecMessage } from '../status/invalid-spec-status.ts';
import { isSameJson, newlyTrue, stampConditions, toStoredStatus } from '../status/stored-status.ts';
import { withTimeout } from '../with-timeout.ts';
import { DeletedPods } from './deleted-pods.ts';
import { EvictionMemory } from './eviction-memory.ts';
import { dependentDrivers } from '../policy/dependent-drivers.ts';
import { KnownRollouts } from './known-rollouts.ts';
import { PodRelevance } from './pod-relevance.ts';
import { RolloutStatusWriter } from './rollout-status-writer.ts';
import { SpecParseCache } from './spec-parse-cache.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import { findRolloutConflicts, type RolloutClaim } from './find-rollout-conflicts.ts';
import { WakeSignal } from './wake-signal.ts';
import { WrittenNodes } from './written-nodes.ts';

/** An Event that hangs is given up after this (logged); one hung request must not stop every rollout. */
const EVENT_TIMEOUT_MS = 30_000;

export type Planner = (snapshot: ClusterSnapshot, policy: DriverRolloutPolicy, nowMs: number) => Plan;

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
 * named, it runs one pass over every DriverRollout: snapshot from the caches, pure plan,
 * execute, status, metrics. Passes never overlap. Nothing decided here survives a restart
 * except what the executor wrote to the cluster.
 *
 * Its memory between passes, each a small part with its own tests: WrittenNodes (nodes as last
 * written), EvictionMemory (refused evictions), SpecParseCache, RolloutStatusWriter (what was last
 * written per rollout), KnownRollouts (rollouts with metrics), PodRelevance (which pods wake a pass).
 */
export function createReconciler(deps: ReconcilerDeps): Reconciler {
  const now = deps.now ?? Date.now;
  const log = deps.logger;
  const wake = new WakeSignal(deps.debounceMs ?? 20);
  const writtenNodes = new WrittenNodes();
  const evictions = new EvictionMemory();
  const deletedPods = new DeletedPods();
  const specs = new SpecParseCache();
  const known = new KnownRollouts();
  const relevance = new PodRelevance();
  const statuses = new RolloutStatusWriter(deps.writer, { now, ...(deps.statusMinIntervalMs === undefined ? {} : { minIntervalMs: deps.statusMinIntervalMs }) });
  const inFlight = new NodePlansInFlight(deps.concurrency ?? 32);
  /** Events sent beside the passes (recordEvent never rejects). */
  const eventsBeside = new Set<Promise<void>>();
  const sendBeside = (event: Promise<void>): void => {
    eventsBeside.add(event);
    void event.finally(() => eventsBeside.delete(event));
  };

  const reconcileInvalid = async (rollout: DriverRolloutObject, ref: RolloutRef, result: Extract<ParseResult, { ok: false }>): Promise<void> => {
    const conditions = invalidSpecConditions(result.problems);
    const previous = statuses.previousStatus(rollout);
    const stamped = stampConditions(previous, conditions, ref.generation, new Date(now()).toISOString());
    const status = { observedGeneration: ref.generation, conditions: stamped };
    if (!(await statuses.write(rollout, ref, pick(previous, ['observedGeneration', 'conditions']), status))) return;
    await recordEvent(rollout, ref, 'Warning', 'InvalidSpec', invalidSpecMessage(result.problems));
    log.warn({ rollout: `${ref.namespace}/${ref.name}`, problems: result.problems }, 'DriverRollout spec is invalid; doing nothing');
  };

  const recordEvent = async (rollout: DriverRolloutObject, ref: RolloutRef, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> => {
    try {
      const event = deps.writer.emitEvent({
        target: { kind: 'DriverRollout', name: ref.name, namespace: ref.namespace, uid: rollout.metadata?.uid, apiVersion: DRIVER_ROLLOUT_API_VERSION },
        type,
        reason,
        message,
      });
      await withTimeout(event, EVENT_TIMEOUT_MS, `${reason} event`);
    } catch (error) {
      log.warn({ err: toError(error) }, 'could not record event');
    }
  };

  const reconcileValid = (rollout: DriverRolloutObject, ref: RolloutRef, policy: DriverRolloutPolicy, dependents: readonly string[], signal: AbortSignal): number | null => {
    const nowMs = now();
    // With the raising writes still under way overlaid (NodePlansInFlight.raisingActions): a node
    // whose start is not answered yet counts as started, so its slot is never handed out twice.
    const cached = buildSnapshot(ref, policy, { caches: deps.caches, writtenNodes: writtenNodes.byName, evictionBlocked: evictions.byPodUid, deletedPods: deletedPods.byUid });
    const snapshot = applyActions(dependents.length === 0 ? cached : { ...cached, dependents }, inFlight.raisingActions());
    for (const n of snapshot.nodes) relevance.collect(n.name);
    const plan = deps.plan(snapshot, policy, nowMs);
    const hooks: ExecuteHooks = {
      writer: deps.writer,
      logger: log.child({ rollout: `${ref.namespace}/${ref.name}` }),
      concurrency: deps.concurrency ?? 32,
      signal,
      nodeUid: (name) => deps.caches.nodes.get('', name)?.metadata?.uid,
      podUidsOn: (name) => deps.caches.pods.byIndex(BY_NODE, name).map((p) => p.metadata?.uid ?? ''),
      onNodeWritten: (node) => {
        writtenNodes.written(node);
      },
      onEvictionBlocked: (pod, message, node) => {
        evictions.blocked(pod.uid, { at: now(), message, namespace: pod.namespace, name: pod.name, node });
      },
      onEvicted: (pod) => {
        evictions.evicted(pod.uid);
        deletedPods.deleted(pod);
      },
      onPodDeleted: (pod) => {
        deletedPods.deleted(pod);
      },
      onStateWritten: (action) => {
        const at = now();
        // Refusals belong to one drain: a node leaving its state (failed, retried) starts afresh.
        evictions.forgetNode(action.node);
        if (action.fromSince !== null) deps.metrics.observeStateLeft(policy.driverName, action.from, (at - action.fromSince) / 1000);
        if (action.to === 'upgrade-done' && action.upgradeStartedAt !== null) {
          deps.metrics.observeUpgradeDone(policy.driverName, (at - action.upgradeStartedAt) / 1000);
        }
      },
    };
    // A busy node's plan is still being carried out: it is planned again once that is done (unless
    // it is a mark still queued and this plan moves the node's upgrade: it takes over). Every
    // plan is carried out beside the passes, and no pass waits for one: the next pass overlays
    // the writes that may raise a limited count until they are answered (above).
    inFlight.startPlans(plan.nodePlans, hooks, (_plan, failure) => {
      // Carried out: plan the node's next step (debounced: the nodes of a wave finish together,
      // and one pass should hand out all the slots they give back). Failed: retry soon.
      if (failure === undefined) wake.trigger();
      else wake.wakeAt(now() + 1_000, now());
    });
    if (signal.aborted) return null; // no longer leading: no status write either
    // The status goes out beside the passes, the latest one last (RolloutStatusWriter.submit).
    const previous = statuses.previousStatus(rollout);
    const status = toStoredStatus(previous, plan.status, ref.generation, new Date(nowMs).toISOString());
    if (!isSameJson(previous, status)) {
      const halted = newlyTrue(previous, plan.status.conditions).filter((c) => c.type === 'Halted');
      statuses.submit(rollout, ref, status, {
        signal,
        afterWritten: () => {
          for (const c of halted) sendBeside(recordEvent(rollout, ref, 'Warning', 'Halted', c.message));
        },
        onFailed: (error) => {
          log.error({ rollout: `${ref.namespace}/${ref.name}`, err: error }, 'status patch failed; retrying');
          wake.wakeAt(now() + 1_000, now());
        },
      });
    }
    const labels = { namespace: ref.namespace, rollout: ref.name, driver: policy.driverName };
    known.recorded(`${ref.namespace}/${ref.name}`, labels);
    deps.metrics.setRolloutCounts(labels, plan.status.nodes, policy.autoUpgrade, plan.status.halted);
    return plan.nextWakeAt;
  };

  const pass = async (signal: AbortSignal): Promise<void> => {
    const started = performance.now();
    relevance.startPass();
    known.startPass();
    writtenNodes.forgetStale(deps.caches.nodes);
    evictions.forgetStale(now(), deps.caches.pods);
    deletedPods.forgetStale(deps.caches.pods);
    let nextWakeAt: number | null = null;
    // A copy: the informer may change the cache while this pass awaits API calls.
    const rollouts = [...deps.caches.rollouts.list()];
    // Two rollouts for one driver (any namespaces) or one DaemonSet would fight over the same
    // nodes: only the older acts; the other is reported as an invalid spec.
    const conflicts = findRolloutConflicts(rollouts.flatMap((r) => {
      const result = specs.parse(r);
      return result.ok ? [claimOf(r, result.policy, deps.caches)] : [];
    }));
    // Which drivers load after which (loadsAfter), across every rollout: each planner holds its
    // driver's restart for the drivers that load after it (plan/load-order.ts).
    const dependents = dependentDrivers(rollouts.flatMap((r) => {
      const result = specs.parse(r);
      return result.ok ? [result.policy] : [];
    }));
    for (const rollout of rollouts) {
      if (signal.aborted) return;
      const ref: RolloutRef = {
        namespace: rollout.metadata?.namespace ?? '',
        name: rollout.metadata?.name ?? '',
        generation: rollout.metadata?.generation ?? 0,
      };
      known.seen(`${ref.namespace}/${ref.name}`);
      try {
        const result = specs.parse(rollout);
        const conflict = conflicts.get(`${ref.namespace}/${ref.name}`);
        if (!result.ok) await reconcileInvalid(rollout, ref, result);
        else if (conflict !== undefined) await reconcileInvalid(rollout, ref, { ok: false, problems: conflict });
        else nextWakeAt = minOf(nextWakeAt, reconcileValid(rollout, ref, result.policy, dependents.get(`${result.policy.keyDomain}/${result.policy.driverName}`) ?? [], signal));
      } catch (error) {
        log.error({ rollout: `${ref.namespace}/${ref.name}`, err: toError(error) }, 'reconcile failed; retrying');
        nextWakeAt = minOf(nextWakeAt, now() + 1_000);
      }
    }
    for (const labels of known.forgetUnseen()) deps.metrics.forgetRollout(labels);
    relevance.endPass();
    deps.metrics.observeReconcile((performance.now() - started) / 1000);
    if (nextWakeAt !== null) wake.wakeAt(nextWakeAt, now());
  };

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
      return relevance.isRelevant(kind, object);
    },
    async run(signal) {
      await Promise.race([deps.caches.synced, untilAborted(signal)]);
      // A new term: another replica may have written since; trust only what the caches show.
      statuses.clear();
      evictions.clear();
      deletedPods.clear();
      try {
        while (!signal.aborted) {
          // On the reconciler's clock (the tests' fake one: their passes take no time).
          const started = now();
          await pass(signal);
          wake.pace(now() - started);
          await wake.wait(signal);
        }
      } finally {
        // Plans under way finish (each starts nothing more once the term's signal aborted).
        await inFlight.idle();
        await statuses.idle();
        while (eventsBeside.size > 0) await Promise.all(eventsBeside);
        wake.dispose();
        writtenNodes.clear();
      }
    },
  };
}

/** What a valid rollout claims: its driver's state label, and the DaemonSets its selector picks in its namespace. */
function claimOf(rollout: DriverRolloutObject, policy: DriverRolloutPolicy, caches: Pick<ClusterCaches, 'daemonSets'>): RolloutClaim {
  const namespace = rollout.metadata?.namespace ?? '';
  return {
    key: `${namespace}/${rollout.metadata?.name ?? ''}`,
    // A Date from a typed client, an ISO string from the custom-object informer: compare as ISO.
    createdAt: isoTime(rollout.metadata?.creationTimestamp),
    acting: hasActed(rollout.status),
    driverName: policy.driverName,
    stateLabel: policy.keys.upgradeState,
    daemonSets: [...caches.daemonSets.list()]
      .filter((ds) => ds.metadata?.namespace === namespace && matchesSelector(policy.daemonSetSelector, ds.metadata.labels ?? {}))
      .map((ds) => `${namespace}/${ds.metadata?.name ?? ''}`),
  };
}

/** A stored status (the coordinator wrote one) whose InvalidSpec condition is not True. */
function hasActed(status: unknown): boolean {
  if (typeof status !== 'object' || status === null || !('observedGeneration' in status)) return false;
  const conditions = (status as { conditions?: unknown }).conditions;
  return !(Array.isArray(conditions) && conditions.some((c: { type?: unknown; status?: unknown }) => c.type === 'InvalidSpec' && c.status === 'True'));
}

function isoTime(value: Date | string | undefined): string {
  const ms = value === undefined ? Number.NaN : new Date(value).getTime();
  return Number.isNaN(ms) ? '' : new Date(ms).toISOString();
}

function minOf(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}

function pick(value: unknown, keys: readonly string[]): Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return {};
  return Object.fromEntries(keys.map((k) => [k, (value as Record<string, unknown>)[k]]));
}
