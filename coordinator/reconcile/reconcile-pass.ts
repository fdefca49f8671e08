import type { Logger } from '../../shared/logger.ts';
import { dependentDrivers } from '../policy/dependent-drivers.ts';
import { toError } from '../../shared/errors.ts';
import { buildSnapshot, freshest } from '../cluster/build-snapshot.ts';
import { BY_CONTROLLER, BY_NODE, type ClusterCaches } from '../cluster/cluster-caches.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import type { ExecuteHooks } from '../execute/execute-plan.ts';
import type { CoordinatorMetrics } from '../metrics/coordinator-metrics.ts';
import type { NodePlan, Plan, RollbackRequest } from '../plan/action.ts';
import { CANARY_APPROVED_BY_ANNOTATION, CANARY_APPROVED_REVISION_ANNOTATION, CONTROLLER_REVISION_HASH_LABEL } from '../../shared/keys.ts';
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
 * Reasons of the Events on a DriverRollout: its spec is invalid (every problem named), its
 * failure budget was reached, its canary was approved (naming who) or failed, or a failed canary
 * was rolled back (naming the DaemonSets and revisions). Each has an entry in docs/runbook.md (test/unit/docs/runbook.test.ts).
 */
export const ROLLOUT_EVENT_REASONS = ['InvalidSpec', 'Halted', 'CanaryApproved', 'CanaryFailed', 'CanaryRollback'] as const;
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
    return result.ok ? [{ rollout: r, policy: result.policy, claim: claimOf(r, result.policy, deps.caches) }] : [];
  });
  const conflicts = findRolloutConflicts(valid.map((v) => v.claim));
  // Which drivers load after which (loadsAfter), across every rollout, with their DaemonSets:
  // each planner stops the drivers that load after its own before it reloads (plan/load-order.ts).
  const dependents = dependentDrivers(valid.map((v) => ({ policy: v.policy, daemonSets: v.claim.daemonSets })));
  // The leader polls the alert gates of the rollouts that act (a conflicting one acts on nothing).
  memory.alertGates?.sync(valid.flatMap(({ rollout: r, policy }) => {
    const key = `${r.metadata?.namespace ?? ''}/${r.metadata?.name ?? ''}`;
    return policy.alertGate !== null && !conflicts.has(key) ? [{ key, namespace: r.metadata?.namespace ?? '', gate: policy.alertGate }] : [];
  }), signal);
  for (const rollout of rollouts) {
    if (signal.aborted) return;
    const ref: RolloutRef = {
      namespace: rollout.metadata?.namespace ?? '',
      name: rollout.metadata?.name ?? '',
      generation: rollout.metadata?.generation ?? 0,
      approval: canaryApprovalOf(rollout),
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
  const gated = policy.alertGate === null ? cached : { ...cached, alertGate: memory.alertGates?.reading(`${ref.namespace}/${ref.name}`) ?? null };
  const pendingStarts = memory.inFlight.pendingStarts(policy.keys.upgradeState);
  const read = pendingStarts.length === 0 ? gated : { ...gated, pendingStarts };
  const snapshot = applyActions(dependents.length === 0 ? read : { ...read, dependents }, memory.inFlight.raisingActions());
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
    nodeAsKnown: (name) => freshest(deps.caches.nodes.get('', name), memory.writtenNodes.byName.get(name)),
    onWriteConflict: () => {
      deps.metrics.countWriteConflict(policy.driverName);
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
  // A start planned earlier and not sent yet that this pass would hold is dropped before this
  // pass's plans start: its node settles and the next pass plans it afresh (plan/pending-starts.ts).
  // This pass's own plan for it was made on the start overlaid, so it goes too.
  const nodePlans = plan.revokedStarts.length === 0 ? plan.nodePlans : withoutRevoked(memory, plan, policy.keys.upgradeState, hooks.logger);
  // A busy node's plan is still being carried out: it is planned again once that is done (unless
  // it is a mark still queued and this plan moves the node's upgrade: it takes over). Every
  // plan is carried out beside the passes, and no pass waits for one: the next pass overlays
  // the writes that may raise a limited count until they are answered (above).
  memory.inFlight.startPlans(nodePlans, hooks, (_plan, failure) => {
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
    const raised = newlyTrue(previous, plan.status.conditions).filter((c) => c.type === 'Halted' || c.type === 'CanaryApproved' || c.type === 'CanaryFailed');
    memory.statuses.submit(rollout, ref, status, {
      signal,
      afterWritten: () => {
        for (const c of raised) {
          const reason = c.type === 'CanaryApproved' || c.type === 'CanaryFailed' ? c.type : 'Halted';
          sendBeside(memory, recordEvent(deps, rollout, ref, reason === 'CanaryApproved' ? 'Normal' : 'Warning', reason, c.message));
        }
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
  deps.metrics.setCanary(labels, plan.status.canary ?? null);
  if (plan.rollback != null) sendBeside(memory, rollBack(deps, memory, rollout, ref, plan.rollback));
  // Once a rollback shows (the canary no longer asks for it), the same revision may fail and be rolled back again.
  else for (const d of snapshot.daemonSets) for (const key of memory.rollbacks) if (key.startsWith(`${ref.namespace}/${d.name}:`)) memory.rollbacks.delete(key);
  return plan.nextWakeAt;
}

/** Drops the plan's revoked starts not sent yet (NodePlansInFlight.revokeStarts); the plan's node plans without those nodes. */
function withoutRevoked(memory: ReconcilerMemory, plan: Plan, labelKey: string, logger: Logger): readonly NodePlan[] {
  const revoked = new Set(plan.revokedStarts.map((r) => r.node));
  const dropped = new Set(memory.inFlight.revokeStarts(revoked, labelKey));
  for (const r of plan.revokedStarts) if (dropped.has(r.node)) logger.info({ node: r.node, reason: r.message }, 'a start planned earlier and not sent yet is revoked: a newer pass holds it');
  return plan.nodePlans.filter((p) => !revoked.has(p.node));
}

/**
 * A failed canary's rollback (onCanaryFailure: Rollback): each DaemonSet's template back to the
 * ControllerRevision the plan names, from that revision's own data only, as `kubectl rollout
 * undo` does; one Event on the DriverRollout says so. Once per DaemonSet and revision in this
 * term (memory.rollbacks); the patch is idempotent, so a new leader doing it again changes nothing.
 */
async function rollBack(deps: PassDeps, memory: ReconcilerMemory, rollout: DriverRolloutObject, ref: RolloutRef, request: RollbackRequest): Promise<void> {
  for (const d of request.daemonSets) {
    const key = `${ref.namespace}/${d.name}:${d.fromRevisionHash}`;
    if (memory.rollbacks.has(key)) continue;
    memory.rollbacks.add(key);
    const ds = deps.caches.daemonSets.get(ref.namespace, d.name);
    const revision = ds === undefined ? undefined : deps.caches.revisions.byIndex(BY_CONTROLLER, ds.metadata?.uid ?? '').find((r) => r.metadata?.labels?.[CONTROLLER_REVISION_HASH_LABEL] === d.toRevisionHash);
    const data: unknown = revision?.data;
    if (typeof data !== 'object' || data === null) {
      deps.logger.error({ rollout: `${ref.namespace}/${ref.name}`, daemonSet: d.name, revision: d.toRevisionHash }, 'canary rollback: the ControllerRevision to roll back to is gone; not rolled back');
      await recordEvent(deps, rollout, ref, 'Warning', 'CanaryRollback', `not rolled back: daemonset/${d.name} has no ControllerRevision ${d.toRevisionHash} any more (canary failed: ${request.reason})`);
      continue;
    }
    try {
      await withTimeout(deps.writer.rollbackDaemonSet(ref.namespace, d.name, data), EVENT_TIMEOUT_MS, 'canary rollback');
      await recordEvent(deps, rollout, ref, 'Warning', 'CanaryRollback', `rolled daemonset/${d.name} back from revision ${d.fromRevisionHash} to ${d.toRevisionHash} (its ControllerRevision's template): canary failed: ${request.reason}`);
    } catch (error) {
      memory.rollbacks.delete(key);
      deps.logger.error({ rollout: `${ref.namespace}/${ref.name}`, daemonSet: d.name, err: toError(error) }, 'canary rollback failed; retrying');
      memory.wake.wakeAt(deps.now() + 1_000, deps.now());
    }
  }
}

/** The DriverRollout's canary approval (`kubectl driver-rollout approve`); null when it has none. */
function canaryApprovalOf(rollout: DriverRolloutObject): RolloutRef['approval'] {
  const annotations = rollout.metadata?.annotations ?? {};
  const revision = annotations[CANARY_APPROVED_REVISION_ANNOTATION];
  return revision === undefined || revision === '' ? null : { revision, by: annotations[CANARY_APPROVED_BY_ANNOTATION] ?? 'unknown' };
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
