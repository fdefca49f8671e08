import type { KubernetesObject, V1Node, V1Pod } from '@kubernetes/client-node';
import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { buildSnapshot, freshest } from '../cluster/build-snapshot.ts';
import type { CacheKind, ClusterCaches } from '../cluster/cluster-caches.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import { executePlan } from '../execute/execute-plan.ts';
import type { CoordinatorMetrics, RolloutLabels } from '../metrics/coordinator-metrics.ts';
import type { Plan } from '../plan/action.ts';
import type { ClusterSnapshot, RolloutRef } from '../plan/snapshot.ts';
import { DRIVER_ROLLOUT_API_VERSION, parseDriverRolloutSpec, type DriverRolloutPolicy, type ParseResult } from '../policy/driver-rollout-spec.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';
import { invalidSpecConditions, invalidSpecMessage } from '../status/invalid-spec-status.ts';
import { isSameJson, newlyTrue, stampConditions, toStoredStatus } from '../status/stored-status.ts';
import { withTimeout } from '../with-timeout.ts';
import { WakeSignal } from './wake-signal.ts';

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

/** Evictions refused this long ago are forgotten (the planner retries them anyway). */
const EVICTION_MEMORY_MS = 10 * 60_000;

/**
 * The coordinator's loop: on a cache change (debounced) or at the earliest deadline any plan
 * named, it runs one pass over every DriverRollout: snapshot from the caches, pure plan,
 * execute, status, metrics. Passes never overlap. Nothing decided here survives a restart
 * except what the executor wrote to the cluster.
 */
export function createReconciler(deps: ReconcilerDeps): Reconciler {
  const now = deps.now ?? Date.now;
  const log = deps.logger;
  const wake = new WakeSignal(deps.debounceMs ?? 20);
  const writtenNodes = new Map<string, V1Node>();
  const evictionBlocked = new Map<string, { at: number; message: string; namespace: string; name: string; node: string }>();
  const parsed = new Map<string, { generation: number; result: ParseResult }>();
  const known = new Map<string, RolloutLabels>();
  /** Nodes in any snapshot of the last pass. */
  let relevantNodes = new Set<string>();
  let nextRelevantNodes = new Set<string>();
  // What this replica last wrote per DriverRollout uid: a status the API server prunes (a schema
  // missing a field) must not be rewritten on every pass, each write waking the next pass.
  const lastWritten = new Map<string, unknown>();
  /** The stored status, or what we last wrote when the stored one has no conditions (not seen yet, or pruned). */
  const previousStatus = (rollout: DriverRolloutObject): unknown => {
    const stored = rollout.status as { conditions?: unknown } | undefined;
    return Array.isArray(stored?.conditions) ? stored : lastWritten.get(rollout.metadata?.uid ?? '');
  };
  const writeStatus = async (rollout: DriverRolloutObject, ref: RolloutRef, stored: unknown, next: object): Promise<boolean> => {
    const uid = rollout.metadata?.uid ?? '';
    if (isSameJson(stored, next) || isSameJson(lastWritten.get(uid), next)) return false;
    await withTimeout(deps.writer.patchRolloutStatus(ref.namespace, ref.name, next as Record<string, unknown>), 30_000, 'status patch');
    lastWritten.set(uid, next);
    return true;
  };

  const parse = (rollout: DriverRolloutObject): ParseResult => {
    const uid = rollout.metadata?.uid ?? '';
    const generation = rollout.metadata?.generation ?? 0;
    const hit = parsed.get(uid);
    if (hit?.generation === generation) return hit.result;
    const result = parseDriverRolloutSpec(rollout.spec);
    parsed.set(uid, { generation, result });
    return result;
  };

  const forgetStale = (nowMs: number): void => {
    for (const [name, node] of writtenNodes) {
      // Gone from the cache: deleted (we only ever write nodes the cache showed us), so forget it
      // too, or a deleted node would live on in every snapshot.
      const cached = deps.caches.nodes.get('', name);
      if (cached === undefined || freshest(cached, node) === cached) writtenNodes.delete(name);
    }
    for (const [uid, entry] of evictionBlocked) {
      if (nowMs - entry.at > EVICTION_MEMORY_MS || deps.caches.pods.get(entry.namespace, entry.name)?.metadata?.uid !== uid) {
        evictionBlocked.delete(uid);
      }
    }
  };

  const reconcileInvalid = async (rollout: DriverRolloutObject, ref: RolloutRef, result: Extract<ParseResult, { ok: false }>): Promise<void> => {
    const conditions = invalidSpecConditions(result.problems);
    const previous = previousStatus(rollout);
    const stamped = stampConditions(previous, conditions, ref.generation, new Date(now()).toISOString());
    const status = { observedGeneration: ref.generation, conditions: stamped };
    if (!(await writeStatus(rollout, ref, pick(previous, ['observedGeneration', 'conditions']), status))) return;
    await recordEvent(rollout, ref, 'Warning', 'InvalidSpec', invalidSpecMessage(result.problems));
    log.warn({ rollout: `${ref.namespace}/${ref.name}`, problems: result.problems }, 'DriverRollout spec is invalid; doing nothing');
  };

  const recordEvent = async (rollout: DriverRolloutObject, ref: RolloutRef, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> => {
    try {
      await deps.writer.emitEvent({
        target: { kind: 'DriverRollout', name: ref.name, namespace: ref.namespace, uid: rollout.metadata?.uid, apiVersion: DRIVER_ROLLOUT_API_VERSION },
        type,
        reason,
        message,
      });
    } catch (error) {
      log.warn({ err: toError(error) }, 'could not record event');
    }
  };

  const reconcileValid = async (rollout: DriverRolloutObject, ref: RolloutRef, policy: DriverRolloutPolicy, signal: AbortSignal): Promise<number | null> => {
    const nowMs = now();
    const snapshot = buildSnapshot(ref, policy, { caches: deps.caches, writtenNodes, evictionBlocked });
    for (const n of snapshot.nodes) nextRelevantNodes.add(n.name);
    const plan = deps.plan(snapshot, policy, nowMs);
    const failures = await executePlan(plan.nodePlans, {
      writer: deps.writer,
      logger: log.child({ rollout: `${ref.namespace}/${ref.name}` }),
      concurrency: deps.concurrency ?? 16,
      signal,
      nodeUid: (name) => deps.caches.nodes.get('', name)?.metadata?.uid,
      onNodeWritten: (node) => writtenNodes.set(node.metadata?.name ?? '', node),
      onEvictionBlocked: (pod, message, node) => evictionBlocked.set(pod.uid, { at: now(), message, namespace: pod.namespace, name: pod.name, node }),
      onEvicted: (pod) => evictionBlocked.delete(pod.uid),
      onStateWritten: (action) => {
        const at = now();
        // Refusals belong to one drain: a node leaving its state (failed, retried) starts afresh.
        for (const [uid, entry] of evictionBlocked) if (entry.node === action.node) evictionBlocked.delete(uid);
        if (action.fromSince !== null) deps.metrics.observeStateLeft(policy.driverName, action.from, (at - action.fromSince) / 1000);
        if (action.to === 'upgrade-done' && action.upgradeStartedAt !== null) {
          deps.metrics.observeUpgradeDone(policy.driverName, (at - action.upgradeStartedAt) / 1000);
        }
      },
    });
    if (signal.aborted) return null; // no longer leading: no status write either
    const status = toStoredStatus(previousStatus(rollout), plan.status, ref.generation, new Date(nowMs).toISOString());
    if (!isSameJson(rollout.status, status)) {
      await deps.writer.patchRolloutStatus(ref.namespace, ref.name, status);
      for (const c of newlyTrue(rollout.status, plan.status.conditions)) {
        if (c.type === 'Halted') await recordEvent(rollout, ref, 'Warning', 'Halted', c.message);
      }
    }
    const labels = { namespace: ref.namespace, rollout: ref.name, driver: policy.driverName };
    known.set(`${ref.namespace}/${ref.name}`, labels);
    deps.metrics.setRolloutCounts(labels, plan.status.nodes, policy.autoUpgrade, plan.status.halted);
    // A failed action is retried on the next pass; wake soon rather than wait for a change.
    const retryAt = failures.length > 0 ? nowMs + 1_000 : null;
    return minOf(plan.nextWakeAt, retryAt);
  };

  const pass = async (signal: AbortSignal): Promise<void> => {
    const started = performance.now();
    nextRelevantNodes = new Set();
    forgetStale(now());
    let nextWakeAt: number | null = null;
    const seen = new Set<string>();
    // A copy: the informer may change the cache while this pass awaits API calls.
    for (const rollout of [...deps.caches.rollouts.list()]) {
      if (signal.aborted) return;
      const ref: RolloutRef = {
        namespace: rollout.metadata?.namespace ?? '',
        name: rollout.metadata?.name ?? '',
        generation: rollout.metadata?.generation ?? 0,
      };
      seen.add(`${ref.namespace}/${ref.name}`);
      try {
        const result = parse(rollout);
        if (!result.ok) await reconcileInvalid(rollout, ref, result);
        else nextWakeAt = minOf(nextWakeAt, await reconcileValid(rollout, ref, result.policy, signal));
      } catch (error) {
        log.error({ rollout: `${ref.namespace}/${ref.name}`, err: toError(error) }, 'reconcile failed; retrying');
        nextWakeAt = minOf(nextWakeAt, now() + 1_000);
      }
    }
    for (const [key, labels] of known) {
      if (!seen.has(key)) {
        deps.metrics.forgetRollout(labels);
        known.delete(key);
      }
    }
    relevantNodes = nextRelevantNodes;
    deps.metrics.observeReconcile((performance.now() - started) / 1000);
    if (nextWakeAt !== null) wake.wakeAt(nextWakeAt, now());
  };

  return {
    trigger: () => {
      wake.trigger();
    },
    isRelevant: (kind, object) => {
      if (kind !== 'pods' || object === undefined) return true;
      const pod = object as V1Pod;
      const node = pod.spec?.nodeName ?? '';
      if (node === '') return false;
      return relevantNodes.has(node) || pod.metadata?.ownerReferences?.some((r) => r.controller === true && r.kind === 'DaemonSet') === true;
    },
    async run(signal) {
      await Promise.race([deps.caches.synced, new Promise((resolve) => { signal.addEventListener('abort', resolve, { once: true }); })]);
      // A new term: another replica may have written since; trust only what the caches show.
      lastWritten.clear();
      evictionBlocked.clear();
      try {
        while (!signal.aborted) {
          await pass(signal);
          await wake.wait(signal);
        }
      } finally {
        wake.dispose();
        writtenNodes.clear();
      }
    },
  };
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
