/**
 * The canary (spec.canary, ours): when a new driver revision appears, a few nodes take it first
 * and every other node waits until the canary is approved for that revision, or (then: Continue)
 * until every canary node has stayed upgrade-done, Ready and schedulable for soakSeconds. A
 * canary node that fails, or while it soaks goes NotReady or loses its driver pod's Ready, fails
 * the canary: the rest wait for good (until another revision), and with onCanaryFailure
 * Rollback the plan asks the shell to put the previous ControllerRevision's template back.
 *
 * Everything it decides from lives on API objects, so a restarted coordinator decides the same:
 * - the canary set of a revision: the nodes whose `<driver>-driver-upgrade.canary` annotation
 *   names it, written on them in the pass that chooses them (with the canary nodes' starts);
 * - a failure: `<driver>-driver-upgrade.canary-failed` on the failing node, with why;
 * - the approval: the DriverRollout's annotations (RolloutRef.approval), bound to one revision;
 * - the soak: the canary nodes' upgrade-done state-start-time annotations.
 *
 * A revision is canaried only when it is new: not when it is the template of an older
 * ControllerRevision made newest again (a rollback, `kubectl rollout undo`: the nodes ran it
 * before), and not when no node waits to upgrade to it.
 */
import type { CanaryPolicy, DriverRolloutPolicy } from '../policy/driver-rollout-spec.ts';
import { matchesSelector } from '../policy/label-selector.ts';
import type { CanaryPhase, CanaryStatus, NodeAction, RollbackRequest } from './action.ts';
import { readUnixSeconds } from './node-view.ts';
import { resolveMaxUnavailable } from './pool-capacity.ts';
import type { DaemonSetSnapshot } from './snapshot.ts';
import type { StartHold } from './start-checks.ts';
import type { NodeContext, Reason } from './step.ts';

export interface CanaryGate {
  /** null: no canary holds this revision (none configured, a rollback, nothing new to upgrade). */
  readonly status: CanaryStatus | null;
  /** Why a node outside the canary may not start; null for canary nodes and once the canary passed. */
  holdFor(node: string): StartHold | null;
  /** Node-object actions per node: the chosen set's annotations, a failure, stale annotations dropped. */
  readonly actions: ReadonlyMap<string, readonly NodeAction[]>;
  /** Set once a failed canary is to be rolled back (onCanaryFailure: Rollback). */
  readonly rollback: RollbackRequest | null;
}

export interface CanaryInput {
  readonly policy: DriverRolloutPolicy;
  readonly now: number;
  /** Every managed node, as step 1 of the pass left it. */
  readonly nodes: readonly NodeContext[];
  /** The nodes in upgrade-required after step 1, in start order (compare-candidates.ts). */
  readonly candidates: readonly NodeContext[];
  readonly daemonSets: readonly DaemonSetSnapshot[];
  /** The DriverRollout's approval, if any (RolloutRef.approval). */
  readonly approval: { readonly revision: string; readonly by: string } | null;
}

const NO_HOLD = (): null => null;
export const NO_CANARY: CanaryGate = { status: null, holdFor: NO_HOLD, actions: new Map(), rollback: null };

/** At most this many canary node names in a reason; the status lists them all. */
const NAMES_IN_REASON = 5;

export function decideCanary(input: CanaryInput): CanaryGate {
  const { policy } = input;
  const canary = policy.canary;
  if (canary === null) return NO_CANARY;
  const revision = rolloutRevision(input.daemonSets);
  const keys = policy.keys;
  const actions = new Map<string, NodeAction[]>();
  const act = (node: string, action: NodeAction): void => {
    const list = actions.get(node);
    if (list === undefined) actions.set(node, [action]);
    else list.push(action);
  };
  // Marks of an older revision's canary mean nothing now: dropped, so the next set starts clean.
  for (const n of input.nodes) {
    const marked = n.view.annotations[keys.canary];
    if (marked === undefined || marked === revision) continue;
    const name = n.view.snapshot.name;
    act(name, { kind: 'removeAnnotation', node: name, key: keys.canary });
    if (n.view.annotations[keys.canaryFailed] !== undefined) act(name, { kind: 'removeAnnotation', node: name, key: keys.canaryFailed });
  }
  if (revision === null) return { ...NO_CANARY, actions };
  let members = input.nodes.filter((n) => n.view.annotations[keys.canary] === revision);
  if (members.length === 0) {
    if (isRunBefore(input) || !input.candidates.some((c) => c.driver.outOfDate.length > 0)) return { ...NO_CANARY, actions };
    members = chooseCanary(input, canary);
    if (members.length === 0) return { ...NO_CANARY, actions };
    for (const m of members) act(m.view.snapshot.name, { kind: 'setAnnotation', node: m.view.snapshot.name, key: keys.canary, value: revision });
  }
  const names = members.map((m) => m.view.snapshot.name).sort();
  const inCanary = new Set(names);
  const verdict = holdsNothing(judge(input, members, revision), input, inCanary);
  if (verdict.newFailure !== null) act(verdict.newFailure.node, { kind: 'setAnnotation', node: verdict.newFailure.node, key: keys.canaryFailed, value: verdict.newFailure.why });
  const rollback = verdict.phase === 'CanaryFailed' && policy.onCanaryFailure === 'Rollback' ? rollbackOf(input, inCanary, verdict.failure ?? '') : null;
  const status: CanaryStatus = {
    revision,
    phase: verdict.phase,
    nodes: names,
    approvedBy: input.approval?.revision === revision ? input.approval.by : null,
    soakUntil: verdict.soakUntil,
    failure: verdict.failure,
    rollback: rollback === null ? null : rollback.daemonSets.map((d) => `${d.name}: ${d.fromRevisionHash} → ${d.toRevisionHash}`).join(', '),
  };
  const hold = holdOf(status, policy, input.now, verdict, rollback);
  return { status, holdFor: hold === null ? NO_HOLD : (node) => (inCanary.has(node) ? null : hold), actions, rollback };
}

/**
 * The newest revision is one the nodes ran before: an older ControllerRevision made newest again
 * (a rollback) that some node still runs. A failed revision pushed again after its rollback is
 * made newest again too, but no node runs it: it is canaried afresh.
 */
function isRunBefore(input: CanaryInput): boolean {
  return input.daemonSets.some(
    (d) => d.newestIsRollback === true && input.nodes.some((n) => n.driver.pods.some((p) => p.daemonSet === d.name && p.revisionHash === d.updatedRevisionHash)),
  );
}

/** `<daemonset>=<hash>` of every driver DaemonSet, sorted, comma-separated; null while any newest revision is unknown. */
export function rolloutRevision(daemonSets: readonly DaemonSetSnapshot[]): string | null {
  if (daemonSets.length === 0 || daemonSets.some((d) => d.updatedRevisionHash === null)) return null;
  return daemonSets.map((d) => `${d.name}=${d.updatedRevisionHash ?? ''}`).sort().join(',');
}

/** The first N nodes in start order among those waiting to upgrade that the selector picks and that may start at all. */
function chooseCanary(input: CanaryInput, canary: CanaryPolicy): NodeContext[] {
  const count = Math.max(1, resolveMaxUnavailable(canary.nodes, input.nodes.length));
  const selector = canary.selector;
  const skip = input.policy.keys.upgradeSkip;
  return input.candidates
    .filter((c) => c.pool.kind === 'pool' && c.driver.pods.length > 0 && c.view.labels[skip] !== 'true' && (selector === null || matchesSelector(selector, c.view.labels)))
    .slice(0, count);
}

interface Verdict {
  readonly phase: CanaryPhase;
  readonly failure: string | null;
  /** A failure first seen in this pass, to record on its node. */
  readonly newFailure: { readonly node: string; readonly why: string } | null;
  /** ms; set while (and once) the canary soaks. */
  readonly soakUntil: number | null;
  /** Canary nodes not yet upgrade-done and Ready, or cordoned while soaking. */
  readonly pending: readonly string[];
}

function judge(input: CanaryInput, members: readonly NodeContext[], revision: string): Verdict {
  const { policy, now } = input;
  const keys = policy.keys;
  const canary = policy.canary;
  const byName = [...members].sort((a, b) => (a.view.snapshot.name < b.view.snapshot.name ? -1 : 1));
  const done = (m: NodeContext): boolean => m.view.state === 'upgrade-done' && m.driver.current;
  const allDone = byName.every(done);
  const lastDone = allDone ? Math.max(...byName.map((m) => readUnixSeconds(m.view.annotations, keys.stateStartTime) ?? now)) : null;
  const soakUntil = lastDone === null || canary === null || canary.then === 'Pause' ? null : lastDone + canary.soakSeconds * 1000;
  // A person's approval of this revision lets the rest go, a failed canary included.
  if (input.approval?.revision === revision) return { phase: 'Rolling', failure: null, newFailure: null, soakUntil, pending: [] };
  const recorded = byName.find((m) => m.view.annotations[keys.canaryFailed] !== undefined);
  if (recorded !== undefined) {
    const why = recorded.view.annotations[keys.canaryFailed] ?? '';
    return { phase: 'CanaryFailed', failure: why, newFailure: null, soakUntil: null, pending: [] };
  }
  if (soakUntil !== null && now >= soakUntil && byName.every((m) => !m.view.unschedulable)) return { phase: 'Rolling', failure: null, newFailure: null, soakUntil, pending: [] };
  for (const m of byName) {
    const why = failureOf(m, policy);
    if (why !== null) return { phase: 'CanaryFailed', failure: why, newFailure: { node: m.view.snapshot.name, why }, soakUntil: null, pending: [] };
  }
  if (!allDone) return { phase: 'Canary', failure: null, newFailure: null, soakUntil: null, pending: byName.filter((m) => !done(m)).map((m) => m.view.snapshot.name) };
  if (soakUntil === null) return { phase: 'WaitingForApproval', failure: null, newFailure: null, soakUntil: null, pending: [] };
  return { phase: 'Soaking', failure: null, newFailure: null, soakUntil, pending: byName.filter((m) => m.view.unschedulable).map((m) => m.view.snapshot.name) };
}

/** Nothing left for a passing canary to hold (it was every node to upgrade): it is rolling, not waiting. */
function holdsNothing(verdict: Verdict, input: CanaryInput, inCanary: ReadonlySet<string>): Verdict {
  if (verdict.phase !== 'WaitingForApproval' && verdict.phase !== 'Soaking') return verdict;
  const outside = input.nodes.some((n) => !inCanary.has(n.view.snapshot.name) && n.driver.outOfDate.length > 0);
  return outside ? verdict : { ...verdict, phase: 'Rolling' };
}

/** Why this canary node fails the canary now; null while it is fine. Upgrading, only a failure counts; done, NotReady and an unready driver pod too. */
function failureOf(m: NodeContext, policy: DriverRolloutPolicy): string | null {
  const name = m.view.snapshot.name;
  if (m.view.state === 'upgrade-failed') return `canary node ${name} failed: ${m.view.annotations[policy.keys.upgradeReason] ?? 'upgrade-failed'}`;
  if (m.view.state !== 'upgrade-done' || !m.driver.current) return null;
  const notReady = m.view.snapshot.notReady;
  if (!m.view.snapshot.ready) return `canary node ${name} went NotReady after its upgrade${notReady == null ? '' : ` (Ready ${notReady.status}: ${notReady.reason})`}`;
  if (!m.driver.ready) return `the driver pod of canary node ${name} stopped being Ready after its upgrade`;
  return null;
}

/** The driver DaemonSets whose newest revision only the canary runs, each back to the revision before it. */
function rollbackOf(input: CanaryInput, inCanary: ReadonlySet<string>, failure: string): RollbackRequest | null {
  const elsewhere = new Set<string>();
  for (const n of input.nodes) {
    if (inCanary.has(n.view.snapshot.name)) continue;
    for (const p of n.view.snapshot.driverPods) if (p.revisionHash !== null) elsewhere.add(`${p.daemonSet}=${p.revisionHash}`);
  }
  const daemonSets = input.daemonSets.flatMap((d) =>
    d.updatedRevisionHash === null || d.previousRevisionHash == null || elsewhere.has(`${d.name}=${d.updatedRevisionHash}`)
      ? []
      : [{ name: d.name, fromRevisionHash: d.updatedRevisionHash, toRevisionHash: d.previousRevisionHash }],
  );
  return daemonSets.length === 0 ? null : { daemonSets, reason: failure };
}

function holdOf(status: CanaryStatus, policy: DriverRolloutPolicy, now: number, verdict: Verdict, rollback: RollbackRequest | null): StartHold | null {
  const nodes = listNames(status.nodes);
  const text = (code: Reason['code'], message: string, detail = message): StartHold => ({ reason: { code, message, detail }, wakeAt: null });
  switch (status.phase) {
    case 'Rolling':
      return null;
    case 'CanaryFailed': {
      const back = rollback === null ? (policy.onCanaryFailure === 'Rollback' ? ' (no previous revision to roll back to)' : '') : `; rolling back ${status.rollback ?? ''}`;
      return text('canary-failed', `halted: canary failed: ${status.failure ?? ''}${back}`);
    }
    case 'Canary': {
      const then = policy.canary?.then === 'Continue' ? `then soak ${policy.canary.soakSeconds}s` : 'then approval';
      return text('canary', `waiting for canary nodes ${nodes} of revision ${status.revision}, ${then}`, `waiting for canary nodes ${nodes} of revision ${status.revision}, ${then}; still upgrading: ${listNames(verdict.pending)}`);
    }
    case 'WaitingForApproval':
      return text('waiting-for-approval', `waiting for approval of canary nodes ${nodes} (revision ${status.revision}): kubectl driver-rollout approve`);
    case 'Soaking': {
      const soakSeconds = policy.canary?.soakSeconds ?? 0;
      if (verdict.pending.length > 0) return text('canary-soaking', `canary soaking: canary node ${listNames(verdict.pending)} cordoned; the soak ends once every canary node is schedulable`);
      const left = Math.max(0, Math.ceil(((status.soakUntil ?? now) - now) / 1000));
      const message = `canary soaking ${soakSeconds}s after the last of canary nodes ${nodes} became upgrade-done (revision ${status.revision})`;
      return { reason: { code: 'canary-soaking', message, detail: `${message}: ${left}s left` }, wakeAt: status.soakUntil };
    }
  }
}

function listNames(names: readonly string[]): string {
  return names.length <= NAMES_IN_REASON ? names.join(', ') : `${names.slice(0, NAMES_IN_REASON).join(', ')} and ${names.length - NAMES_IN_REASON} more`;
}
