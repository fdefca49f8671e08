/**
 * The contract of a state handler: given one node (as the pass sees it so far) and the pass's
 * context, decide what happens to it now. Handlers are pure and small; plan-upgrades.ts runs them
 * and turns their results into actions, reasons and timers.
 */
import type { UpgradeState } from '../../shared/keys.ts';
import { NodeAnnotationProblem, parseNodeAnnotation, UNIX_SECONDS } from '../../shared/node-annotations.ts';
import type { DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import type { NodeAction, ReasonCode } from './action.ts';
import type { PoolAssignment } from './assign-pool.ts';
import type { DriverPodStatus } from './driver-pod-status.ts';
import { toUnixSeconds, type NodeView } from './node-view.ts';
import type { DependentDriverSnapshot, PdbSnapshot } from './snapshot.ts';
import type { PoolDisruption } from './pool-disruption.ts';

export interface StepContext {
  readonly policy: DriverRolloutPolicy;
  /** ms since epoch. */
  readonly now: number;
  /** DaemonSet name → newest revision hash. */
  readonly revisions: ReadonlyMap<string, string | null>;
  /** DaemonSet name → the driver its newest template loads (DaemonSetSnapshot.templateFingerprint); null when unknown. */
  readonly fingerprints: ReadonlyMap<string, string | null>;
  /** DaemonSet name → who signed the modules its newest template loads, as it declares (DaemonSetSnapshot.templateModuleSigner); null when it does not say. */
  readonly signers: ReadonlyMap<string, string | null>;
  readonly pdbsByNamespace: ReadonlyMap<string, readonly PdbSnapshot[]>;
  /** ClusterSnapshot.dependents: drivers that load after this one. */
  readonly dependents: readonly DependentDriverSnapshot[];
  /** Pools with too many nodes NotReady at once (pool-disruption.ts), by name; healthy pools are absent. */
  readonly disruptions: ReadonlyMap<string, PoolDisruption>;
}

export interface NodeContext {
  readonly view: NodeView;
  readonly driver: DriverPodStatus;
  readonly pool: PoolAssignment;
}

export interface Reason {
  readonly code: ReasonCode;
  readonly message: string;
  readonly detail: string;
}

export type StepResult =
  /** Move to `to`. `actions` run before the state label changes. `chain`: run the next handler in this pass. */
  | {
      readonly kind: 'advance';
      readonly to: UpgradeState;
      readonly actions: readonly NodeAction[];
      readonly chain: boolean;
      /** A Warning event to emit with the transition (timeouts, failures, fallbacks). */
      readonly warning?: string;
      /** Actions that must run after the state label changed (e.g. dropping the initial-state annotation). */
      readonly after?: readonly NodeAction[];
      /** The state is left at once, its step off or with nothing to do: why (SetStateAction.skipped). */
      readonly skipped?: string;
    }
  /** Stay; `reason` says why; `wakeAt` (ms) when a timer could change the decision. */
  | { readonly kind: 'wait'; readonly actions: readonly NodeAction[]; readonly reason: Reason; readonly wakeAt: number | null }
  /** Nothing to explain: done and current, or a step that only waits for its own write to show (the cordon). */
  | { readonly kind: 'idle'; readonly actions: readonly NodeAction[] }
  /** In upgrade-required and ready to be considered for a slot. */
  | { readonly kind: 'candidate'; readonly actions: readonly NodeAction[] };

export type StateHandler = (node: NodeContext, ctx: StepContext) => StepResult;

export function advance(to: UpgradeState, chain: boolean, actions: readonly NodeAction[] = [], warning?: string): StepResult {
  return warning === undefined ? { kind: 'advance', to, actions, chain } : { kind: 'advance', to, actions, chain, warning };
}

/** Leave the state at once, nothing done in it (its step is off or has nothing to do), saying why. */
export function skip(to: UpgradeState, why: string): StepResult {
  return { kind: 'advance', to, actions: [], chain: true, skipped: why };
}

export function wait(reason: Reason, actions: readonly NodeAction[] = [], wakeAt: number | null = null): StepResult {
  return { kind: 'wait', actions, reason, wakeAt };
}

/**
 * Advance to upgrade-failed, recording why in the node's reason annotation and the driver
 * revision it failed at (a newer revision retries the node, see handle-upgrade-failed.ts).
 */
export function fail(node: NodeContext, ctx: StepContext, why: string, actions: readonly NodeAction[] = []): StepResult {
  const name = node.view.snapshot.name;
  const records: NodeAction[] = [{ kind: 'setAnnotation', node: name, key: ctx.policy.keys.upgradeReason, value: why }];
  const revision = driverRevisionOf(node, ctx);
  if (revision !== '') records.push({ kind: 'setAnnotation', node: name, key: ctx.policy.keys.failedRevision, value: revision });
  return advance('upgrade-failed', true, [...actions, ...records], why);
}

/** The newest revision of each driver DaemonSet with a pod on the node (`<daemonset>=<hash>`, sorted, comma-separated); '' when none is known. */
export function driverRevisionOf(node: NodeContext, ctx: StepContext): string {
  const daemonSets = [...new Set(node.view.snapshot.driverPods.map((p) => p.daemonSet))].sort();
  const known = daemonSets.flatMap((ds) => {
    const hash = ctx.revisions.get(ds) ?? null;
    return hash === null ? [] : [`${ds}=${hash}`];
  });
  return known.length === daemonSets.length ? known.join(',') : '';
}

export interface Timer {
  /** ms since epoch. */
  readonly start: number;
  /** Writes the start time when the annotation was missing (restart-safe timers live on the node). */
  readonly actions: readonly NodeAction[];
  /** ms since epoch, or null when the timeout is 0 (forever). */
  readonly deadline: number | null;
  readonly expired: boolean;
  /** "(120s of 600s)" or "(120s, no timeout)". */
  readonly progress: string;
}

/**
 * The timer whose start `key` records. A start that is not unix seconds starts the timer afresh,
 * with a Warning Event that names it (once: the fresh start replaces it).
 */
export function readTimer(node: NodeContext, ctx: StepContext, key: string, timeoutSeconds: number): Timer {
  const name = node.view.snapshot.name;
  const read = parseNodeAnnotation(UNIX_SECONDS, `node/${name}`, key, node.view.annotations[key]);
  const recorded = typeof read === 'number' ? read : null;
  const start = recorded ?? ctx.now;
  const actions: NodeAction[] = recorded === null ? [{ kind: 'setAnnotation', node: name, key, value: toUnixSeconds(ctx.now) }] : [];
  if (read instanceof NodeAnnotationProblem) {
    actions.push({ kind: 'emitEvent', node: name, type: 'Warning', reason: ctx.policy.eventReason, message: `${read.message}; the timer starts afresh` });
  }
  const deadline = timeoutSeconds === 0 ? null : start + timeoutSeconds * 1000;
  const elapsed = Math.max(0, Math.floor((ctx.now - start) / 1000));
  return {
    start,
    actions,
    deadline,
    expired: deadline !== null && ctx.now >= deadline,
    progress: timeoutSeconds === 0 ? `(${elapsed}s, no timeout)` : `(${elapsed}s of ${timeoutSeconds}s)`,
  };
}

/** "timeout 600s" or "no timeout", for stable messages. */
export function timeoutText(timeoutSeconds: number): string {
  return timeoutSeconds === 0 ? 'no timeout' : `timeout ${timeoutSeconds}s`;
}
