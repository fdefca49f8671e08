/**
 * The promises a rollout keeps, checked from the outside. Written apart from the planner on
 * purpose: nothing here imports coordinator/ (no isOutOfService, resolveMaxUnavailable,
 * assignPool, label-selector, spec parser), so a wrong definition there is caught here instead
 * of mirrored. Inputs are plain data read off the API objects (see observe-objects.ts) and the
 * DriverRollout spec as the user wrote it (defaults applied here, from the documented ones).
 *
 * The definitions (README, coordinator/plan/README.md, and the GPU Operator's upgrade docs):
 * - out of service: cordoned, or NotReady, or in a state that takes the node's workloads away
 *   (cordon-required … validation-required);
 * - upgrading (holds a maxParallelUpgrades slot): in cordon-required … validation-required;
 * - maxUnavailable "N%" of a pool of T nodes allows ceil(N × T / 100) nodes; 0 for maxParallelUpgrades
 *   means no limit;
 * - pools: a node matching no pool's nodeSelector is in the default pool; a node matching two
 *   pools is in none (left alone);
 * - nodes already out of service before the rollout took them (an admin's cordon, a NotReady
 *   node) count against the limit but may exceed it: the rollout only must never take a node
 *   that was in service out of service while that leaves its pool above the limit.
 */

export interface ObservedNode {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly unschedulable: boolean;
  readonly ready: boolean;
}

export interface LabelSelectorObject {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly { readonly key: string; readonly operator: string; readonly values?: readonly string[] }[];
}

export interface ObservedPool {
  readonly name: string;
  /** null: the default pool. */
  readonly selector: LabelSelectorObject | null;
  readonly maxUnavailable: number | string;
  readonly maxParallelUpgrades: number;
}

/** What the observer reads from a DriverRollout: its own reading of the spec. */
export interface ObservedRollout {
  readonly driverName: string;
  readonly stateKey: string;
  readonly pools: readonly ObservedPool[];
  readonly defaultPool: ObservedPool;
}

const UPGRADING = new Set([
  'cordon-required',
  'wait-for-jobs-required',
  'pod-deletion-required',
  'drain-required',
  'pod-restart-required',
  'validation-required',
]);

const NOT_STARTED = new Set(['', 'unknown', 'upgrade-done', 'upgrade-required']);

/** The GPU Operator's label, `nvidia.com/<driver>-driver-upgrade-state` (another domain when the spec names one). */
export function upgradeStateKey(driverName: string, keyDomain = 'nvidia.com'): string {
  return `${keyDomain}/${driverName}-driver-upgrade-state`;
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** The spec as written, with the documented defaults: maxUnavailable 25%, maxParallelUpgrades 1. */
export function readRollout(spec: unknown): ObservedRollout {
  const s = record(spec);
  const policy = record(s.upgradePolicy);
  const driverName = typeof s.driverName === 'string' ? s.driverName : '';
  const topUnavailable = (policy.maxUnavailable as number | string | undefined) ?? '25%';
  const topParallel = (policy.maxParallelUpgrades as number | undefined) ?? 1;
  const pools = (Array.isArray(s.pools) ? s.pools : []).map((p): ObservedPool => {
    const pool = record(p);
    return {
      name: String(pool.name),
      selector: record(pool.nodeSelector),
      maxUnavailable: (pool.maxUnavailable as number | string | undefined) ?? topUnavailable,
      maxParallelUpgrades: (pool.maxParallelUpgrades as number | undefined) ?? topParallel,
    };
  });
  const keyDomain = typeof s.keyDomain === 'string' ? s.keyDomain : undefined;
  return {
    driverName,
    stateKey: upgradeStateKey(driverName, keyDomain),
    pools,
    defaultPool: { name: 'default', selector: null, maxUnavailable: topUnavailable, maxParallelUpgrades: topParallel },
  };
}

/** Kubernetes label selector semantics (object form); an empty selector matches every node. */
export function selects(selector: LabelSelectorObject, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const values = e.values ?? [];
    const ok =
      e.operator === 'In' ? has && values.includes(value ?? '') :
      e.operator === 'NotIn' ? !has || !values.includes(value ?? '') :
      e.operator === 'Exists' ? has :
      e.operator === 'DoesNotExist' ? !has :
      false;
    if (!ok) return false;
  }
  return true;
}

/** The pool's name, or null when the node matches two or more pools (left alone). */
export function poolOf(node: ObservedNode, rollout: ObservedRollout): string | null {
  const matching = rollout.pools.filter((p) => p.selector !== null && selects(p.selector, node.labels));
  if (matching.length > 1) return null;
  return matching[0]?.name ?? rollout.defaultPool.name;
}

/** maxUnavailable as a node count for a pool of `total` nodes: "N%" rounds up. */
export function allowedUnavailable(value: number | string, total: number): number {
  if (typeof value === 'number') return value;
  const match = /^(\d+)%$/.exec(value);
  if (match === null) throw new Error(`not an int or percentage: ${JSON.stringify(value)}`);
  return Math.ceil((Number(match[1]) * total) / 100);
}

const domainOf = (rollout: ObservedRollout): string => rollout.stateKey.slice(0, rollout.stateKey.indexOf('/'));

export const stateOf = (node: ObservedNode, stateKey: string): string => node.labels[stateKey] ?? 'unknown';
export const isUpgradingState = (state: string): boolean => UPGRADING.has(state);
export const hasNotStarted = (state: string): boolean => NOT_STARTED.has(state);

export function isOutOfService(node: ObservedNode, stateKey: string): boolean {
  return node.unschedulable || !node.ready || UPGRADING.has(stateOf(node, stateKey));
}

interface PoolTally {
  total: number;
  outOfService: number;
  upgrading: number;
}

function tally(nodes: readonly ObservedNode[], rollout: ObservedRollout): Map<string, PoolTally> {
  const pools = new Map<string, PoolTally>();
  for (const node of nodes) {
    const pool = poolOf(node, rollout);
    if (pool === null) continue;
    const t = pools.get(pool) ?? { total: 0, outOfService: 0, upgrading: 0 };
    t.total += 1;
    if (isOutOfService(node, rollout.stateKey)) t.outOfService += 1;
    if (UPGRADING.has(stateOf(node, rollout.stateKey))) t.upgrading += 1;
    pools.set(pool, t);
  }
  return pools;
}

function poolByName(rollout: ObservedRollout, name: string): ObservedPool {
  return rollout.pools.find((p) => p.name === name) ?? rollout.defaultPool;
}

/**
 * The limits across one change (`before` → `after`, the same cluster a moment apart): a pool may
 * be above maxUnavailable (or maxParallelUpgrades) only if no node of it went from in service to
 * out of service (from not upgrading to upgrading) in this change by the rollout's hand (a state
 * or cordon change; a node that merely turned NotReady is the world's doing).
 */
export function limitViolations(before: readonly ObservedNode[], after: readonly ObservedNode[], rollout: ObservedRollout): string[] {
  const key = rollout.stateKey;
  const was = new Map(before.map((n) => [n.name, n]));
  const takenOut = new Set<string>();
  const started = new Set<string>();
  for (const node of after) {
    const prior = was.get(node.name);
    if (prior === undefined) continue;
    const pool = poolOf(node, rollout);
    if (pool === null) continue;
    const byRollout = prior.unschedulable !== node.unschedulable || stateOf(prior, key) !== stateOf(node, key);
    if (byRollout && !isOutOfService(prior, key) && isOutOfService(node, key)) takenOut.add(pool);
    if (!UPGRADING.has(stateOf(prior, key)) && UPGRADING.has(stateOf(node, key))) started.add(pool);
  }
  const violations: string[] = [];
  for (const [name, t] of tally(after, rollout)) {
    const pool = poolByName(rollout, name);
    const limit = allowedUnavailable(pool.maxUnavailable, t.total);
    if (takenOut.has(name) && t.outOfService > limit) {
      violations.push(`pool ${name}: ${t.outOfService} of ${t.total} nodes out of service, maxUnavailable ${String(pool.maxUnavailable)} allows ${limit}`);
    }
    if (started.has(name) && pool.maxParallelUpgrades > 0 && t.upgrading > pool.maxParallelUpgrades) {
      violations.push(`pool ${name}: ${t.upgrading} nodes upgrading, maxParallelUpgrades ${pool.maxParallelUpgrades}`);
    }
  }
  return violations;
}

/**
 * Nodes an admin cordoned: cordoned while this driver's upgrade had not started and no other
 * driver's upgrade was under way on them (a state label of another driver in an upgrading
 * state), or marked so by the rollout itself when it found the cordon (the
 * `...driver-upgrade.initial-state.unschedulable` annotation, read as a fact on the object).
 */
export function adminCordoned(nodes: readonly ObservedNode[], rollout: ObservedRollout): Set<string> {
  const ours = rollout.stateKey;
  const marker = `${domainOf(rollout)}/${rollout.driverName}-driver-upgrade.node-initial-state.unschedulable`;
  return new Set(
    nodes
      .filter((n) => {
        if (!n.unschedulable) return false;
        if (n.annotations[marker] === 'true') return true;
        return hasNotStarted(stateOf(n, ours)) && heldByOtherDrivers(n, rollout).length === 0;
      })
      .map((n) => n.name),
  );
}

/**
 * Other drivers' upgrades that need this node cordoned (their state label in cordon-required …
 * validation-required, or upgrade-failed, which keeps the node cordoned): while one does, this
 * rollout must not lift the cordon. (At uncordon-required the other driver is ready and only
 * lifts its own cordon next: lifting it first takes nothing away.)
 */
export function heldByOtherDrivers(node: ObservedNode, rollout: ObservedRollout): string[] {
  return Object.entries(node.labels)
    .filter(([k, v]) => k !== rollout.stateKey && k.endsWith('-driver-upgrade-state') && (UPGRADING.has(v) || v === 'upgrade-failed'))
    .map(([k, v]) => `${k}=${v}`);
}

/** An admin's cordon is never lifted by the rollout. */
export function uncordonViolations(after: readonly ObservedNode[], cordonedByAdmin: ReadonlySet<string>): string[] {
  return after.filter((n) => cordonedByAdmin.has(n.name) && !n.unschedulable).map((n) => `${n.name}: an admin's cordon was lifted`);
}

export interface ObservedPod {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** The controller's kind and name, or null for a bare pod. */
  readonly owner: { readonly kind: string; readonly name: string } | null;
  readonly nodeName: string;
}

/**
 * Why removing this pod (eviction or deletion) breaks a promise, or undefined when the policy
 * may remove it: DaemonSet pods other than the driver's own, mirror pods and drain-skip pods are
 * never removed; `drainSelector` (the policy's drain.podSelector as a set of label pairs, when
 * the test uses one) limits the rest.
 */
export function protectedPodRemoval(pod: ObservedPod, rollout: ObservedRollout, options: { readonly driverDaemonSets: readonly string[]; readonly drainSelector?: LabelSelectorObject }): string | undefined {
  const id = `${pod.namespace}/${pod.name}`;
  if (pod.annotations['kubernetes.io/config.mirror'] !== undefined) return `mirror pod ${id} removed`;
  if (pod.owner?.kind === 'DaemonSet' && !options.driverDaemonSets.includes(pod.owner.name)) return `DaemonSet pod ${id} removed`;
  const skipKey = `${domainOf(rollout)}/${rollout.driverName}-driver-upgrade-drain.skip`;
  if (pod.labels[skipKey] === 'true') return `drain-skip pod ${id} removed`;
  if (options.drainSelector !== undefined && pod.owner?.kind !== 'DaemonSet' && !selects(options.drainSelector, pod.labels)) return `pod ${id} outside the drain selector removed`;
  return undefined;
}

/**
 * The end of a rollout: every node upgrade-done or upgrade-failed, a failed one with its reason,
 * and no node the rollout cordoned left cordoned at upgrade-done.
 */
export function settledViolations(nodes: readonly ObservedNode[], rollout: ObservedRollout, cordonedByAdmin: ReadonlySet<string>): string[] {
  const key = rollout.stateKey;
  const reasonKey = `${domainOf(rollout)}/${rollout.driverName}-driver-upgrade.reason`;
  const violations: string[] = [];
  for (const n of nodes) {
    if (poolOf(n, rollout) === null) continue;
    const state = stateOf(n, key);
    if (state === 'upgrade-done') {
      if (n.unschedulable && !cordonedByAdmin.has(n.name)) violations.push(`${n.name}: upgrade-done but left cordoned`);
    } else if (state === 'upgrade-failed') {
      if ((n.annotations[reasonKey] ?? '') === '') violations.push(`${n.name}: upgrade-failed without a reason`);
    } else {
      violations.push(`${n.name}: ended in ${state}${n.annotations[reasonKey] === undefined ? ' (silently: no reason)' : `: ${n.annotations[reasonKey]}`}`);
    }
  }
  return violations;
}
