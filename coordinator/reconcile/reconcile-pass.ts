import type { Logger } from '../../shared/logger.ts';
import { dependentDrivers } from '../policy/dependent-drivers.ts';
import { toError } from '../../shared/errors.ts';
import { buildSnapshot } from '../cluster/build-snapshot.ts';
import { BY_NODE, type ClusterCaches } from '../cluster/cluster-caches.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import type { ExecuteHooks } from '../execute/execute-plan.ts';
import type { CoordinatorMetrics } from '../metrics/coordinator-metrics.ts';
import type { Plan } from '../plan/action.ts';
import { applyActions } from '../plan/apply-actions.ts';
import type { ClusterSnapshot, DependentDriverSnapshot, RolloutRef } from '../plan/snapshot.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import { DRIVER_ROLLOUT_API_VERSION, type DriverRolloutPolicy, type ParseResult } from '../policy/driver-rollout-spec.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';
import { invalidSpecConditions, invalidSpecMessage } from '../status/invalid-spec-status.ts';
import { isSameJson, newlyTrue, stampConditions, toStoredStatus } from '../status/stored-status.ts';
import { withTimeout } from '../with-timeout.ts';
import { findRolloutConflicts, type RolloutClaim } from './find-rollout-conflicts.ts';
import type { ReconcilerMemory } from './reconciler-memory.ts';

/** An Event that hangs is given up after this (logged); one hung request must not stop every rollout. */
const EVENT_TIMEOUT_MS = 30_000;

export type Planner = (snapshot: ClusterSnapshot, policy: DriverRolloutPolicy, nowMs: number) => Plan;

/** What a pass reads, writes and reports through; the loop's memory comes beside it (ReconcilerMemory). */
export interface PassDeps {
  readonly caches: ClusterCaches;
  readonly writer: ClusterWriter;
  readonly plan: Planner;
  readonly metrics: CoordinatorMetrics;
  readonly logger: Logger;
  readonly now: () => number;
  /** Nodes the executor works on at once. */
  readonly concurrency: number;
}

/**
 * Reasons of the Events on a DriverRollout: its spec is invalid (every problem named), or its
 * failure budget was reached. Each has an entry in docs/runbook.md (test/unit/docs/runbook.test.ts).
 */
export const ROLLOUT_EVENT_REASONS = ['InvalidSpec', 'Halted'] as const;
export type RolloutEventReason = (typeof ROLLOUT_EVENT_REASONS)[number];

/**
 * One pass over every DriverRollout: snapshot from the caches (with the loop's read-your-writes
 * overlays), pure plan, node plans started beside the pass, status submitted, metrics. A rollout
 * whose spec is invalid, or that conflicts with an older one for the same driver or DaemonSet,
 * gets an InvalidSpec status and Event and nothing else. Ends by setting the loop's wake-up to the
 * earliest deadline any plan named (a failed rollout: in a second).
 */
export async function reconcilePass(deps: PassDeps, memory: ReconcilerMemory, signal: AbortSignal): Promise<void> {
  const started = performance.now();
  memory.relevance.startPass();
  memory.known.startPass();
  memory.writtenNodes.forgetStale(deps.caches.nodes);
  memory.evictions.forgetStale(deps.now(), deps.caches.pods);
  memory.deletedPods.forgetStale(deps.caches.pods);
  let nextWakeAt: number | null = null;
  // A copy: the informer may change the cache while this pass awaits API calls.
  const rollouts = [...deps.caches.rollouts.list()];
  // Two rollouts for one driver (any namespaces) or one DaemonSet would fight over the same
  // nodes: only the older acts; the other is reported as an invalid spec.
  const valid = rollouts.flatMap((r) => {
    const result = memory.specs.parse(r);
    return result.ok ? [{ policy: result.policy, claim: claimOf(r, result.policy, deps.caches) }] : [];
  });
  const conflicts = findRolloutConflicts(valid.map((v) => v.claim));
  // Which drivers load after which (loadsAfter), across every rollout, with their DaemonSets:
  // each planner stops the drivers that load after its own before it reloads (plan/load-order.ts).
  const dependents = dependentDrivers(valid.map((v) => ({ policy: v.policy, daemonSets: v.claim.daemonSets })));
  for (const rollout of rollouts) {
    if (signal.aborted) return;
    const ref: RolloutRef = {
      namespace: rollout.metadata?.namespace ?? '',
      name: rollout.metadata?.name ?? '',
      generation: rollout.metadata?.generation ?? 0,
    };
    memory.known.seen(`${ref.namespace}/${ref.name}`);
    try {
      const result = memory.specs.parse(rollout);
      const conflict = conflicts.get(`${ref.namespace}/${ref.name}`);
      if (!result.ok) await reconcileInvalid(deps, memory, rollout, ref, result);
      else if (conflict !== undefined) await reconcileInvalid(deps, memory, rollout, ref, { ok: false, problems: conflict });
      else nextWakeAt = minOf(nextWakeAt, reconcileValid(deps, memory, rollout, ref, result.policy, dependents.get(`${result.policy.keyDomain}/${result.policy.driverName}`) ?? [], signal));
    } catch (error) {
      deps.logger.error({ rollout: `${ref.namespace}/${ref.name}`, err: toError(error) }, 'reconcile failed; retrying');
      nextWakeAt = minOf(nextWakeAt, deps.now() + 1_000);
    }
  }
  for (const labels of memory.known.forgetUnseen()) deps.metrics.forgetRollout(labels);
  memory.relevance.endPass();
  deps.metrics.observeReconcile((performance.now() - started) / 1000);
  if (nextWakeAt !== null) memory.wake.wakeAt(nextWakeAt, deps.now());
}

async function reconcileInvalid(deps: PassDeps, memory: ReconcilerMemory, rollout: DriverRolloutObject, ref: RolloutRef, result: Extract<ParseResult, { ok: false }>): Promise<void> {
  const conditions = invalidSpecConditions(result.problems);
  const previous = memory.statuses.previousStatus(rollout);
  const stamped = stampConditions(previous, conditions, ref.generation, new Date(deps.now()).toISOString());
  const status = { observedGeneration: ref.generation, conditions: stamped };
  if (!(await memory.statuses.write(rollout, ref, pick(previous, ['observedGeneration', 'conditions']), status))) return;
  await recordEvent(deps, rollout, ref, 'Warning', 'InvalidSpec', invalidSpecMessage(result.problems));
  deps.logger.warn({ rollout: `${ref.namespace}/${ref.name}`, problems: result.problems }, 'DriverRollout spec is invalid; doing nothing');
}

async function recordEvent(deps: PassDeps, rollout: DriverRolloutObject, ref: RolloutRef, type: 'Normal' | 'Warning', reason: RolloutEventReason, message: string): Promise<void> {
  try {
    const event = deps.writer.emitEvent({
      target: { kind: 'DriverRollout', name: ref.name, namespace: ref.namespace, uid: rollout.metadata?.uid, apiVersion: DRIVER_ROLLOUT_API_VERSION },
      type,
      reason,
      message,
    });
    await withTimeout(event, EVENT_TIMEOUT_MS, `${reason} event`);
  } catch (error) {
    deps.logger.warn({ err: toError(error) }, 'could not record event');
  }
}

function reconcileValid(deps: PassDeps, memory: ReconcilerMemory, rollout: DriverRolloutObject, ref: RolloutRef, policy: DriverRolloutPolicy, dependents: readonly DependentDriverSnapshot[], signal: AbortSignal): number | null {
  const nowMs = deps.now();
  // With the raising writes still under way overlaid (NodePlansInFlight.raisingActions): a node
  // whose start is not answered yet counts as started, so its slot is never handed out twice.
  const cached = buildSnapshot(ref, policy, { caches: deps.caches, writtenNodes: memory.writtenNodes.byName, evictionBlocked: memory.evictions.byPodUid, deletedPods: memory.deletedPods.byUid });
  const snapshot = applyActions(dependents.length === 0 ? cached : { ...cached, dependents }, memory.inFlight.raisingActions());
  for (const n of snapshot.nodes) memory.relevance.collect(n.name);
  const plan = deps.plan(snapshot, policy, nowMs);
  const hooks: ExecuteHooks = {
    writer: deps.writer,
    logger: deps.logger.child({ rollout: `${ref.namespace}/${ref.name}` }),
    concurrency: deps.concurrency,
    signal,
    nodeUid: (name) => deps.caches.nodes.get('', name)?.metadata?.uid,
    podUidsOn: (name) => deps.caches.pods.byIndex(BY_NODE, name).map((p) => p.metadata?.uid ?? ''),
    onNodeWritten: (node) => {
      memory.writtenNodes.written(node);
    },
    onEvictionBlocked: (pod, message, node) => {
      memory.evictions.blocked(pod.uid, { at: deps.now(), message, namespace: pod.namespace, name: pod.name, node });
    },
    onEvicted: (pod) => {
      memory.evictions.evicted(pod.uid);
      memory.deletedPods.deleted(pod);
    },
    onPodDeleted: (pod) => {
      memory.deletedPods.deleted(pod);
    },
    onStateWritten: (action) => {
      const at = deps.now();
      // Refusals belong to one drain: a node leaving its state (failed, retried) starts afresh.
      memory.evictions.forgetNode(action.node);
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
  memory.inFlight.startPlans(plan.nodePlans, hooks, (_plan, failure) => {
    // Carried out: plan the node's next step (debounced: the nodes of a wave finish together,
    // and one pass should hand out all the slots they give back). Failed: retry soon.
    if (failure === undefined) memory.wake.trigger();
    else memory.wake.wakeAt(deps.now() + 1_000, deps.now());
  });
  if (signal.aborted) return null; // no longer leading: no status write either
  // The status goes out beside the passes, the latest one last (RolloutStatusWriter.submit).
  const previous = memory.statuses.previousStatus(rollout);
  const status = toStoredStatus(previous, plan.status, ref.generation, new Date(nowMs).toISOString());
  if (!isSameJson(previous, status)) {
    const halted = newlyTrue(previous, plan.status.conditions).filter((c) => c.type === 'Halted');
    memory.statuses.submit(rollout, ref, status, {
      signal,
      afterWritten: () => {
        for (const c of halted) sendBeside(memory, recordEvent(deps, rollout, ref, 'Warning', 'Halted', c.message));
      },
      onFailed: (error) => {
        deps.logger.error({ rollout: `${ref.namespace}/${ref.name}`, err: error }, 'status patch failed; retrying');
        memory.wake.wakeAt(deps.now() + 1_000, deps.now());
      },
    });
  }
  const labels = { namespace: ref.namespace, rollout: ref.name, driver: policy.driverName };
  memory.known.recorded(`${ref.namespace}/${ref.name}`, labels);
  deps.metrics.setRolloutCounts(labels, plan.status.nodes, policy.autoUpgrade, plan.status.halted);
  return plan.nextWakeAt;
}

/** Keeps an Event sent beside the passes until it settles (recordEvent never rejects), so the loop can wait for it. */
function sendBeside(memory: ReconcilerMemory, event: Promise<void>): void {
  memory.eventsBeside.add(event);
  void event.finally(() => memory.eventsBeside.delete(event));
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
