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
 *   that was in service out of service while that leaves its pool above the limit;
 * - pods the policy names for removal (see protectedPodRemoval): device pods (a container
 *   requesting or limiting a resource named with one of podDeletion.resourcePrefixes, by default
 *   the GPU's or the NIC's by the driver's name, or matching podDeletion.podSelector) while pod deletion
 *   is on; pods matching drain.podSelector ("" = all) and not labelled drain-skip while drain is
 *   on; of DaemonSet pods only the driver's own, device clients (a device pod, or matching
 *   clients.podSelector) and operands (pods selecting the node by one of clients.operandLabels,
 *   default the GPU Operator's `nvidia.com/gpu.deploy.*` labels for driver `gpu`) whose node label
 *   the rollout set to `paused-for-driver-upgrade`.
 */

export interface ObservedNode {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly unschedulable: boolean;
  readonly ready: boolean;
  /**
   * Joined while the observer watched and not yet seen Ready: a node on its way in, which has
   * never given its pool any capacity. The limits leave it out of the pool (out of its count and
   * of the total the percentage is taken of): a rollout that started a node a moment before such
   * a node showed up took nothing from it, and could not have known of it (chaos node-churn,
   * CI run of session 8: a pool of one in service started its node as a new node joined NotReady).
   */
  readonly joining?: boolean;
}

/**
 * Whether a node the watch just saw is joining (ObservedNode.joining): not Ready, and either first
 * seen by an ADDED event after the watch began (`prior` undefined) or joining when last seen.
 */
export function isJoining(prior: ObservedNode | undefined, ready: boolean, added: boolean): boolean {
  if (ready) return false;
  return prior === undefined ? added : prior.joining === true;
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

/** Which pods the policy may remove, read from the spec (selectors in object form). */
export interface ObservedRemovalRules {
  readonly podDeletion: { readonly enable: boolean; readonly resourcePrefixes: readonly string[]; readonly podSelector: LabelSelectorObject | null };
  /** podSelector {} (from "") selects every pod. */
  readonly drain: { readonly enable: boolean; readonly podSelector: LabelSelectorObject };
  readonly clients: { readonly operandLabels: readonly string[]; readonly podSelector: LabelSelectorObject | null };
}

/** What the observer reads from a DriverRollout: its own reading of the spec. */
export interface ObservedRollout {
  readonly driverName: string;
  readonly stateKey: string;
  readonly pools: readonly ObservedPool[];
  readonly defaultPool: ObservedPool;
  readonly removal: ObservedRemovalRules;
  /** maxFailedNodes: at this many upgrade-failed nodes no further node starts; null never halts. */
  readonly maxFailedNodes: number | null;
}

/** The value k8s-driver-manager (and the rollout) give an operand's node label to pause it. */
export const OPERAND_PAUSED = 'paused-for-driver-upgrade';

/** The GPU Operator's operand labels (device plugin, GFD, DCGM exporter, DCGM, MIG manager), paused by default for driver `gpu`. */
const GPU_OPERANDS = [
  'nvidia.com/gpu.deploy.device-plugin',
  'nvidia.com/gpu.deploy.gpu-feature-discovery',
  'nvidia.com/gpu.deploy.dcgm-exporter',
  'nvidia.com/gpu.deploy.dcgm',
  'nvidia.com/gpu.deploy.mig-manager',
];

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
    removal: readRemovalRules(driverName, policy),
    maxFailedNodes: typeof s.maxFailedNodes === 'number' ? s.maxFailedNodes : null,
  };
}

const strings = (value: unknown): string[] | undefined => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined);
/** An optional pod selector: absent or "" selects no pod. */
const optionalSelector = (value: unknown): LabelSelectorObject | null => (typeof value === 'string' && value.trim() !== '' ? readSelectorString(value) : null);

const GPU_RESOURCES = ['nvidia.com/gpu', 'nvidia.com/mig-'];
const NIC_RESOURCES = ['rdma/', 'nvidia.com/hostdev', 'nvidia.com/rdma', 'openshift.io/'];

const GPU_DRIVERS = ['gpu', 'nvidia'];
const NIC_DRIVERS = ['ofed', 'mofed', 'doca', 'nic', 'mlx5'];

/** As coordinator/README documents: GPU resources for gpu/nvidia, NIC resources for ofed/mofed/doca/nic/mlx5, both otherwise. */
function defaultDevicePrefixes(driverName: string): string[] {
  if (GPU_DRIVERS.includes(driverName)) return GPU_RESOURCES;
  if (NIC_DRIVERS.includes(driverName)) return NIC_RESOURCES;
  return [...GPU_RESOURCES, ...NIC_RESOURCES];
}

/**
 * Documented defaults, by the operator the driver comes from: pod deletion on and drain off but
 * for NIC drivers (the Network Operator's: no pod deletion, drain on); operands only for GPU drivers.
 */
function readRemovalRules(driverName: string, policy: Record<string, unknown>): ObservedRemovalRules {
  const deletion = record(policy.podDeletion);
  const drain = record(policy.drain);
  const clients = record(policy.clients);
  const nic = NIC_DRIVERS.includes(driverName);
  return {
    podDeletion: {
      enable: typeof deletion.enable === 'boolean' ? deletion.enable : !nic,
      resourcePrefixes: strings(deletion.resourcePrefixes) ?? defaultDevicePrefixes(driverName),
      podSelector: optionalSelector(deletion.podSelector),
    },
    drain: { enable: typeof drain.enable === 'boolean' ? drain.enable : nic, podSelector: readSelectorString(typeof drain.podSelector === 'string' ? drain.podSelector : '') },
    clients: {
      operandLabels: strings(clients.operandLabels) ?? (GPU_DRIVERS.includes(driverName) ? GPU_OPERANDS : []),
      podSelector: optionalSelector(clients.podSelector),
    },
  };
}

/**
 * A label selector in string form (`a=b,c!=d,e in (x,y),f notin (z),g,!h`; "" selects all) in
 * object form. Throws on text it cannot read: the observer reads only specs the test wrote.
 */
export function readSelectorString(text: string): LabelSelectorObject {
  const parts = text.split(/,(?![^(]*\))/).map((p) => p.trim()).filter((p) => p !== '');
  const matchExpressions = parts.map((part) => {
    const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    if (set !== null) return { key: set[1] ?? '', operator: set[2] === 'in' ? 'In' : 'NotIn', values: (set[3] ?? '').split(',').map((v) => v.trim()) };
    const pair = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
    if (pair !== null) return { key: pair[1] ?? '', operator: pair[2] === '!=' ? 'NotIn' : 'In', values: [pair[3] ?? ''] };
    const exists = /^(!?)([^!=\s(),]+)$/.exec(part);
    if (exists !== null) return { key: exists[2] ?? '', operator: exists[1] === '!' ? 'DoesNotExist' : 'Exists' };
    throw new Error(`observer: cannot read selector part ${JSON.stringify(part)} of ${JSON.stringify(text)}`);
  });
  return { matchExpressions };
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

/** `node cordon-required`, `node NotReady, cordoned`: what makes a node out of service. */
function whyOutOfService(node: ObservedNode, stateKey: string): string {
  const state = stateOf(node, stateKey);
  const reasons = [...(UPGRADING.has(state) ? [state] : []), ...(node.ready ? [] : ['NotReady']), ...(node.unschedulable ? ['cordoned'] : [])];
  return `${node.name} ${reasons.join(', ')}`;
}

interface PoolTally {
  total: number;
  outOfService: number;
  /** Of those, nodes out of service only by another driver's cordon (its upgrade under way, this one's not). */
  heldByOthers: number;
  upgrading: number;
  /** The out-of-service nodes and why, for a violation's message: `node state`, `node NotReady`, `node cordoned`. */
  why: string[];
}

function tally(nodes: readonly ObservedNode[], rollout: ObservedRollout): Map<string, PoolTally> {
  const pools = new Map<string, PoolTally>();
  for (const node of nodes) {
    if (node.joining === true) continue;
    const pool = poolOf(node, rollout);
    if (pool === null) continue;
    const t = pools.get(pool) ?? { total: 0, outOfService: 0, heldByOthers: 0, upgrading: 0, why: [] };
    t.total += 1;
    if (isOutOfService(node, rollout.stateKey)) {
      t.outOfService += 1;
      if (node.ready && !UPGRADING.has(stateOf(node, rollout.stateKey)) && heldByOtherDrivers(node, rollout).length > 0) t.heldByOthers += 1;
      t.why.push(whyOutOfService(node, rollout.stateKey));
    }
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
 * or cordon change; a node that merely turned NotReady is the world's doing, and a cordon that
 * another driver's upgrade holds is that driver's). Nodes out of service only by another driver's
 * cordon do not count here: two coordinators see each other's cordons an informer's lag late, so
 * one's start and the other's cordon (a start, a cordon again after an outside uncordon) may land
 * together, each within its limit as it saw the pool. Each driver's own nodes are judged by its
 * own limit; the coordinator does count the other's cordons (pool-capacity.ts), which no
 * observer of the outcome can tell from this race.
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
    // A cordon that comes with another driver's upgrade under way (its start, its cordon again) is that driver's.
    const cordonedByUs = prior.unschedulable !== node.unschedulable && heldByOtherDrivers(node, rollout).length === 0;
    const byRollout = cordonedByUs || stateOf(prior, key) !== stateOf(node, key);
    if (byRollout && !isOutOfService(prior, key) && isOutOfService(node, key)) takenOut.add(pool);
    if (!UPGRADING.has(stateOf(prior, key)) && UPGRADING.has(stateOf(node, key))) started.add(pool);
  }
  const violations: string[] = [];
  for (const [name, t] of tally(after, rollout)) {
    const pool = poolByName(rollout, name);
    const limit = allowedUnavailable(pool.maxUnavailable, t.total);
    if (takenOut.has(name) && t.outOfService - t.heldByOthers > limit) {
      violations.push(`pool ${name}: ${t.outOfService} of ${t.total} nodes out of service, maxUnavailable ${String(pool.maxUnavailable)} allows ${limit} (${t.why.join(', ')})`);
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

/** The steps between a driver's cordon and its validation: the rollout keeps the node cordoned through them. */
const CORDONED_STEPS = new Set(['wait-for-jobs-required', 'pod-deletion-required', 'drain-required', 'pod-restart-required', 'validation-required']);
/** Where a node moves on to from a cordoned step: a later one, or past the driver restart. */
const LATER_STEPS = new Set([...CORDONED_STEPS, 'uncordon-required', 'upgrade-done']);

/**
 * What the observer remembers of one node's cordon in one driver's upgrade: `held` once seen
 * cordoned in a cordoned step; `movesUncordoned` from when it was then seen schedulable in one
 * (uncordoned from outside): the steps the rollout has moved it on since while it stayed so.
 */
export interface CordonWatch {
  readonly held: boolean;
  readonly movesUncordoned: number | null;
}

/**
 * A node uncordoned from outside in a step that needs it cordoned (wait-for-jobs-required …
 * validation-required) is not left schedulable while its driver restart is pending: the rollout
 * cordons it again, or sends it back to cordon-required (or fails it), before it moves it on.
 * One step on while schedulable is the write under way when the uncordon came, planned on the
 * node as it was; a second is a violation. A node never seen cordoned in those steps (a
 * restart-only upgrade never cordons) is not judged. `before` → `after`: the node a change apart.
 */
export function cordonLostViolation(prior: CordonWatch | undefined, before: ObservedNode | undefined, after: ObservedNode, rollout: ObservedRollout): { watch: CordonWatch; violation: string | null } {
  const key = rollout.stateKey;
  const state = stateOf(after, key);
  const from = before === undefined ? state : stateOf(before, key);
  let moves = prior?.movesUncordoned ?? null;
  let violation: string | null = null;
  if (moves !== null && from !== state) {
    if (after.unschedulable || !LATER_STEPS.has(state)) moves = null;
    else if ((moves += 1) > 1) violation = `${after.name}: ${rollout.driverName} moved on from ${from} to ${state} with the node uncordoned from outside and not cordoned again (${moves} steps since)`;
  }
  if (!CORDONED_STEPS.has(state)) return { watch: { held: false, movesUncordoned: null }, violation };
  if (after.unschedulable) return { watch: { held: true, movesUncordoned: null }, violation };
  const held = prior?.held ?? false;
  return { watch: { held, movesUncordoned: held ? (moves ?? 0) : null }, violation };
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
  /** Resource names its containers (init containers too) request or limit. */
  readonly resourceNames: readonly string[];
  /** Node label keys it selects its node by (nodeSelector and required node affinity). */
  readonly nodeSelectorKeys: readonly string[];
}

export interface PodRemovalOptions {
  /** The driver DaemonSets (their pods are replaced by the rollout itself). */
  readonly driverDaemonSets: readonly string[];
  /** The labels of the pod's node as last seen; {} when unknown. */
  readonly nodeLabels?: Readonly<Record<string, string>>;
}

/** A device pod by the policy's podDeletion rules (resource name prefixes, podSelector). */
export function isDevicePod(pod: ObservedPod, rollout: ObservedRollout): boolean {
  const rules = rollout.removal.podDeletion;
  if (pod.resourceNames.some((r) => rules.resourcePrefixes.some((prefix) => r.startsWith(prefix)))) return true;
  return rules.podSelector !== null && selects(rules.podSelector, pod.labels);
}

/** The operand labels (clients.operandLabels) this pod selects its node by. */
export function operandLabelsOf(pod: ObservedPod, rollout: ObservedRollout): string[] {
  return pod.nodeSelectorKeys.filter((k) => rollout.removal.clients.operandLabels.includes(k));
}

/**
 * Why removing this pod (eviction or deletion) breaks a promise, or undefined when the policy
 * may remove it. Mirror pods are never removed. A DaemonSet pod may go only when it is the
 * driver's own, a device client (clients step), or an operand whose node label is paused (the
 * DaemonSet controller then removes it; `nodeLabels` must show the pause). Any other pod only as
 * a device pod while pod deletion is on, or as a pod drain.podSelector selects, not labelled
 * drain-skip, while drain is on.
 */
export function protectedPodRemoval(pod: ObservedPod, rollout: ObservedRollout, options: PodRemovalOptions): string | undefined {
  const id = `${pod.namespace}/${pod.name}`;
  const rules = rollout.removal;
  if (pod.annotations['kubernetes.io/config.mirror'] !== undefined) return `mirror pod ${id} removed`;
  if (pod.owner?.kind === 'DaemonSet') {
    if (options.driverDaemonSets.includes(pod.owner.name)) return undefined;
    if (isDevicePod(pod, rollout) || (rules.clients.podSelector !== null && selects(rules.clients.podSelector, pod.labels))) return undefined;
    const operands = operandLabelsOf(pod, rollout);
    if (operands.some((k) => options.nodeLabels?.[k] === OPERAND_PAUSED)) return undefined;
    if (operands.length > 0) return `operand pod ${id} removed while its node's ${operands.join(', ')} ${operands.length > 1 ? 'are' : 'is'} not ${OPERAND_PAUSED}`;
    return `DaemonSet pod ${id} removed`;
  }
  if (rules.podDeletion.enable && isDevicePod(pod, rollout)) return undefined;
  const skipKey = `${domainOf(rollout)}/${rollout.driverName}-driver-upgrade-drain.skip`;
  if (pod.labels[skipKey] === 'true') return `drain-skip pod ${id} removed`;
  if (!rules.drain.enable) return `pod ${id} removed: not a device pod, and drain is off`;
  if (!selects(rules.drain.podSelector, pod.labels)) return `pod ${id} outside the drain selector removed`;
  return undefined;
}

/**
 * A node the rollout cannot start, by its own limits, for as long as nothing else changes: it
 * has not started and says why (the reason annotation), and its pool's maxUnavailable is used up
 * by nodes that stay out of service on their own (upgrade-failed, which keeps its cordon;
 * cordoned by an admin; NotReady), and it is in service itself (starting a node already out of
 * service takes nothing more away, so the limit never holds it back). A legitimate end of a
 * rollout, not a silent wait.
 */
export function blockedByLimit(node: ObservedNode, nodes: readonly ObservedNode[], rollout: ObservedRollout, cordonedByAdmin: ReadonlySet<string>): boolean {
  const key = rollout.stateKey;
  const reasonKey = `${domainOf(rollout)}/${rollout.driverName}-driver-upgrade.reason`;
  const pool = poolOf(node, rollout);
  if (pool === null || !hasNotStarted(stateOf(node, key)) || stateOf(node, key) === 'upgrade-done' || (node.annotations[reasonKey] ?? '') === '') return false;
  // A node out of service already (an admin's cordon, NotReady) takes nothing more away: the limit never holds it back.
  if (isOutOfService(node, key)) return false;
  const members = nodes.filter((n) => poolOf(n, rollout) === pool);
  const stuck = members.filter((n) => stateOf(n, key) === 'upgrade-failed' || cordonedByAdmin.has(n.name) || !n.ready).length;
  return stuck >= allowedUnavailable(poolByName(rollout, pool).maxUnavailable, members.length);
}

/**
 * A node the rollout may no longer start because its failure budget is spent: it has not
 * started, says why (the reason annotation), and at least maxFailedNodes of the rollout's nodes
 * are upgrade-failed. A legitimate end (the halt), not a silent wait.
 */
export function haltedByBudget(node: ObservedNode, nodes: readonly ObservedNode[], rollout: ObservedRollout): boolean {
  const key = rollout.stateKey;
  const reasonKey = `${domainOf(rollout)}/${rollout.driverName}-driver-upgrade.reason`;
  if (rollout.maxFailedNodes === null || poolOf(node, rollout) === null) return false;
  if (!hasNotStarted(stateOf(node, key)) || stateOf(node, key) === 'upgrade-done' || (node.annotations[reasonKey] ?? '') === '') return false;
  const failed = nodes.filter((n) => poolOf(n, rollout) !== null && stateOf(n, key) === 'upgrade-failed').length;
  return failed >= rollout.maxFailedNodes;
}

/**
 * The end of a rollout: every node upgrade-done or upgrade-failed, a failed one with its reason,
 * blocked by its pool's limit (blockedByLimit) or halted by the failure budget (haltedByBudget), and no node the rollout cordoned left
 * cordoned at upgrade-done.
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
    } else if (!blockedByLimit(n, nodes, rollout, cordonedByAdmin) && !haltedByBudget(n, nodes, rollout)) {
      violations.push(`${n.name}: ended in ${state}${n.annotations[reasonKey] === undefined ? ' (silently: no reason)' : `: ${n.annotations[reasonKey]}`}`);
    }
  }
  return violations;
}

/** A PodDisruptionBudget as the observer reads it. */
export interface ObservedBudget {
  readonly namespace: string;
  readonly name: string;
  readonly selector: LabelSelectorObject;
  readonly maxUnavailable: number | string | null;
}

/**
 * Why removing this pod broke a PodDisruptionBudget that never allows a disruption
 * (maxUnavailable 0 or "0%"; the rollout drains through the Eviction API, which refuses every
 * eviction such a budget covers), or undefined. Budgets with other limits are the API server's to
 * enforce (their allowance depends on the other pods' health at that moment).
 */
export function neverDisruptedRemoval(pod: ObservedPod, budgets: readonly ObservedBudget[]): string | undefined {
  const budget = budgets.find((b) => b.namespace === pod.namespace && (b.maxUnavailable === 0 || b.maxUnavailable === '0%') && selects(b.selector, pod.labels));
  return budget === undefined ? undefined : `pod ${pod.namespace}/${pod.name} removed though PodDisruptionBudget ${budget.name} (maxUnavailable ${String(budget.maxUnavailable)}) never allows a disruption`;
}
