import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { compileLabelSelector, matchesSelector, type LabelSelectorObject, type Selector } from '../coordinator/policy/label-selector.ts';
import { DEFAULT_KEY_DOMAIN, driverKeys, isUpgradeState, NEXT_KERNEL_FAILED, type DriverKeys, type UpgradeState } from '../shared/keys.ts';
import { NodeAnnotationProblem, readNodeAnnotation } from '../shared/node-annotations.ts';

/** One node of a rollout as the plugin shows it. */
export interface NodeView {
  readonly name: string;
  readonly pool: string;
  readonly state: UpgradeState;
  /** Seconds in the current state (from the coordinator's state-start-time annotation); null when unknown. */
  readonly secondsInState: number | null;
  /**
   * Why the node is not moving: the coordinator's reason annotation, else the rollout status's
   * entry for the node if it names the state the node is in now (the status is written at most
   * once a second and may trail the node). '' for a node in upgrade-done: it waits for nothing,
   * and no reason left from an earlier state is shown.
   */
  readonly reason: string;
  /** Driver version loaded on the node (the agent's label); null when none is loaded. */
  readonly driverVersion: string | null;
  readonly driverReady: boolean;
  readonly cordoned: boolean;
  readonly skipped: boolean;
  /**
   * The agent's next-kernel preflight: the newest other installed kernel the driver does not
   * build for (`''` when the agent named none), null when it builds for all of them or was not run.
   */
  readonly nextKernelFailed: string | null;
}

/** One DriverRollout with its nodes: what `status` prints and `-o json|yaml` emits. */
export interface RolloutView {
  readonly namespace: string;
  readonly name: string;
  readonly driver: string;
  readonly keyDomain: string;
  readonly total: number;
  readonly done: number;
  readonly failed: number;
  readonly inProgress: number;
  readonly paused: boolean;
  readonly halted: boolean;
  /** The spec's problem when the coordinator refused it (InvalidSpec condition), else null. */
  readonly invalidSpec: string | null;
  /** The status's maintenance window when the rollout has windows; null when it has none (always open) or no status yet. */
  readonly maintenanceWindow: { readonly open: boolean; readonly closesAt: string; readonly nextOpening: string; readonly nextWindow: string } | null;
  /** The canary of the newest revision as the status has it; null when none holds one. */
  readonly canary: CanaryView | null;
  /** The alert gate's verdict (status.alertGate); null without a gate or before the coordinator wrote one. */
  readonly alertGate: { readonly state: string; readonly message: string } | null;
  readonly nodes: readonly NodeView[];
}

/** status.canary: phase (Canary, WaitingForApproval, Soaking, Rolling, CanaryFailed), nodes, who approved. */
export interface CanaryView {
  readonly revision: string;
  readonly phase: string;
  readonly nodes: readonly string[];
  readonly approvedBy: string | null;
  readonly soakUntil: string | null;
  readonly failure: string | null;
}

/** A DriverRollout as read from the API (spec and status untrusted: every field optional). */
export interface RolloutObject {
  readonly metadata?: { readonly name?: string; readonly namespace?: string; readonly uid?: string };
  readonly spec?: {
    readonly driverName?: string;
    readonly keyDomain?: string;
    readonly selector?: LabelSelectorObject;
    readonly upgradePolicy?: { readonly autoUpgrade?: boolean };
    readonly pools?: readonly { readonly name?: string; readonly nodeSelector?: LabelSelectorObject }[];
  };
  readonly status?: {
    readonly paused?: boolean;
    readonly halted?: boolean;
    readonly nodes?: { readonly total?: number; readonly done?: number; readonly failed?: number; readonly inProgress?: number };
    readonly waiting?: readonly { readonly node?: string; readonly state?: string; readonly reason?: string }[];
    readonly conditions?: readonly { readonly type?: string; readonly status?: string; readonly message?: string }[];
    readonly maintenanceWindow?: { readonly open?: boolean; readonly closesAt?: string; readonly nextOpening?: string; readonly nextWindow?: string };
    readonly canary?: {
      readonly revision?: string;
      readonly phase?: string;
      readonly nodes?: readonly string[];
      readonly approvedBy?: string | null;
      readonly soakUntil?: string | null;
      readonly failure?: string | null;
    } | null;
    readonly alertGate?: { readonly state?: string; readonly message?: string } | null;
  };
}

/** The cluster as the plugin read it: every DriverRollout asked for, the nodes, and the driver pods. */
export interface ClusterSnapshot {
  readonly rollouts: readonly RolloutObject[];
  readonly nodes: readonly V1Node[];
  /** Pods of the rollouts' namespaces (the driver DaemonSets' pods among them). */
  readonly pods: readonly V1Pod[];
  /** uid of each DaemonSet a rollout selects, per rollout uid. */
  readonly daemonSetUids: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * The views of every rollout in the snapshot, pure. A rollout's nodes are those carrying its
 * state label (the coordinator labels every node it manages) and those running a pod of its
 * DaemonSets (not yet labelled).
 */
export function buildRolloutViews(snapshot: ClusterSnapshot, nowMs: number): RolloutView[] {
  return snapshot.rollouts.map((r) => buildRolloutView(r, snapshot, nowMs)).sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
}

function buildRolloutView(rollout: RolloutObject, snapshot: ClusterSnapshot, nowMs: number): RolloutView {
  const driver = rollout.spec?.driverName ?? '?';
  const keyDomain = rollout.spec?.keyDomain ?? DEFAULT_KEY_DOMAIN;
  const keys = driverKeys(driver, keyDomain);
  const namespace = rollout.metadata?.namespace ?? '';
  const podsByNode = driverPodsByNode(snapshot, namespace, snapshot.daemonSetUids.get(rollout.metadata?.uid ?? '') ?? new Set<string>());
  const waiting = new Map((rollout.status?.waiting ?? []).map((w) => [w.node ?? '', { state: w.state ?? '', reason: w.reason ?? '' }]));
  const pools = compilePools(rollout);
  const nodes = snapshot.nodes
    .filter((n) => n.metadata?.labels?.[keys.upgradeState] !== undefined || podsByNode.has(n.metadata?.name ?? ''))
    .map((n) => nodeView(n, { keys, pools, waiting, pod: podsByNode.get(n.metadata?.name ?? ''), nowMs }))
    .sort((a, b) => a.pool.localeCompare(b.pool) || a.name.localeCompare(b.name));
  return { namespace, name: rollout.metadata?.name ?? '', driver, keyDomain, ...summary(rollout, nodes), maintenanceWindow: maintenanceWindowOf(rollout.status?.maintenanceWindow), canary: canaryView(rollout.status?.canary), nodes };
}

function reasonOf(state: UpgradeState, annotated: string | undefined, listed: { readonly state: string; readonly reason: string } | undefined): string {
  if (state === 'upgrade-done') return '';
  return annotated ?? (listed?.state === state ? listed.reason : '');
}

function driverPodsByNode(snapshot: ClusterSnapshot, namespace: string, dsUids: ReadonlySet<string>): Map<string, V1Pod> {
  const out = new Map<string, V1Pod>();
  for (const p of snapshot.pods) {
    if (p.metadata?.namespace !== namespace || p.metadata.deletionTimestamp !== undefined || p.spec?.nodeName === undefined) continue;
    const owner = p.metadata.ownerReferences?.find((o) => o.kind === 'DaemonSet');
    if (owner !== undefined && dsUids.has(owner.uid)) out.set(p.spec.nodeName, p);
  }
  return out;
}

interface NodeContext {
  readonly keys: DriverKeys;
  readonly pools: readonly CompiledPool[];
  readonly waiting: ReadonlyMap<string, { readonly state: string; readonly reason: string }>;
  readonly pod: V1Pod | undefined;
  readonly nowMs: number;
}

function nodeView(n: V1Node, ctx: NodeContext): NodeView {
  const { keys } = ctx;
  const name = n.metadata?.name ?? '';
  const labels = n.metadata?.labels ?? {};
  const annotations = n.metadata?.annotations ?? {};
  const stateLabel = labels[keys.upgradeState] ?? 'unknown';
  const state = isUpgradeState(stateLabel) ? stateLabel : 'unknown';
  const since = readNodeAnnotation({ name, annotations }, keys, 'stateStartTime');
  // A Ready driver pod has every readiness gate True, the agent's driver-ready condition among them.
  const podReady = ctx.pod?.status?.conditions?.find((c) => c.type === 'Ready');
  return {
    name,
    pool: poolOf(ctx.pools, labels),
    state,
    secondsInState: typeof since === 'number' && since > 0 ? Math.max(0, Math.round((ctx.nowMs - since) / 1000)) : null,
    reason: reasonOf(state, textOf(readNodeAnnotation({ name, annotations }, keys, 'upgradeReason')), ctx.waiting.get(name)) || (state === 'upgrade-done' ? '' : (textOf(since) ?? '')),
    driverVersion: labels[keys.driverVersion] ?? null,
    driverReady: podReady === undefined ? labels[keys.driverReady] === 'true' : podReady.status === 'True',
    cordoned: n.spec?.unschedulable === true,
    skipped: labels[keys.upgradeSkip] === 'true',
    nextKernelFailed: nextKernelFailed(keys, labels),
  };
}

/** Text as read, or the problem's message (any text parses; an unreadable start time is shown as one). */
function textOf(read: string | number | NodeAnnotationProblem | undefined): string | undefined {
  return read instanceof NodeAnnotationProblem ? read.message : typeof read === 'string' ? read : undefined;
}

/** The agent's next-kernel preflight labels: the failing kernel it named (`''`: none named), null when not failed. */
function nextKernelFailed(keys: DriverKeys, labels: Readonly<Record<string, string>>): string | null {
  return labels[keys.nextKernel] === NEXT_KERNEL_FAILED ? (labels[keys.nextKernelFailed] ?? '') : null;
}

/** The counts of the rollout's status; from the nodes when the coordinator wrote none yet. */
function summary(rollout: RolloutObject, nodes: readonly NodeView[]): Pick<RolloutView, 'total' | 'done' | 'failed' | 'inProgress' | 'paused' | 'halted' | 'invalidSpec' | 'alertGate'> {
  const status = rollout.status;
  const counted = status?.nodes;
  return {
    total: counted?.total ?? nodes.length,
    done: counted?.done ?? nodes.filter((n) => n.state === 'upgrade-done').length,
    failed: counted?.failed ?? nodes.filter((n) => n.state === 'upgrade-failed').length,
    inProgress: counted?.inProgress ?? 0,
    paused: status?.paused ?? rollout.spec?.upgradePolicy?.autoUpgrade === false,
    halted: status?.halted ?? false,
    invalidSpec: invalidSpecOf(status?.conditions),
    alertGate: alertGateOf(status?.alertGate),
  };
}

/** The status's maintenance window; null when there is none to show (no windows: open with nothing to say, or no status). */
function maintenanceWindowOf(w: NonNullable<RolloutObject['status']>['maintenanceWindow']): RolloutView['maintenanceWindow'] {
  if (w === undefined) return null;
  const view = { open: w.open ?? true, closesAt: w.closesAt ?? '', nextOpening: w.nextOpening ?? '', nextWindow: w.nextWindow ?? '' };
  return view.open && view.closesAt === '' && view.nextOpening === '' ? null : view;
}

function canaryView(canary: NonNullable<RolloutObject['status']>['canary']): CanaryView | null {
  if (canary == null || canary.revision === undefined) return null;
  return {
    revision: canary.revision,
    phase: canary.phase ?? '?',
    nodes: canary.nodes ?? [],
    approvedBy: canary.approvedBy ?? null,
    soakUntil: canary.soakUntil ?? null,
    failure: canary.failure ?? null,
  };
}

function invalidSpecOf(conditions: NonNullable<RolloutObject['status']>['conditions']): string | null {
  const invalid = conditions?.find((c) => c.type === 'InvalidSpec' && c.status === 'True');
  return invalid === undefined ? null : (invalid.message ?? 'invalid spec');
}

function alertGateOf(gate: { readonly state?: string; readonly message?: string } | null | undefined): RolloutView['alertGate'] {
  return gate?.state === undefined ? null : { state: gate.state, message: gate.message ?? '' };
}

interface CompiledPool {
  readonly name: string;
  readonly selector: Selector;
}

function compilePools(rollout: RolloutObject): CompiledPool[] {
  const out: CompiledPool[] = [];
  for (const p of rollout.spec?.pools ?? []) {
    const compiled = compileLabelSelector(p.nodeSelector ?? {});
    if (compiled.ok && p.name !== undefined) out.push({ name: p.name, selector: compiled.selector });
  }
  return out;
}

/** The coordinator's rule: a node in no pool is in "default"; a node in two pools is left alone. */
function poolOf(pools: readonly CompiledPool[], labels: Readonly<Record<string, string>>): string {
  const matching = pools.filter((p) => matchesSelector(p.selector, labels));
  if (matching.length === 0) return 'default';
  if (matching.length === 1) return matching[0]?.name ?? 'default';
  return `(${matching.map((p) => p.name).join('+')})`;
}
