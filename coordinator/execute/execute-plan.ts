import { isDeepStrictEqual } from 'node:util';
import type { V1Node } from '@kubernetes/client-node';
import { DriverRolloutError, toError } from '../../shared/errors.ts';
import { nodeFactsOf } from '../cluster/snapshot-of-object.ts';
import type { Logger } from '../../shared/logger.ts';
import type { NodeAction, NodeObjectAction, NodePlan, RequireSamePodsAction, SetStateAction } from '../plan/action.ts';
import { changesCordon, guardedNodePatch, nodePatchOf, startsUpgrade, type NodeAsRead } from '../plan/node-patch.ts';
import type { PodRef } from '../plan/snapshot.ts';
import { apiErrorMessage, isInvalid } from '../../shared/kube/api-error.ts';
import { withTimeout } from '../with-timeout.ts';
import type { ClusterWriter } from './cluster-writer.ts';
import { coalesceNodeActions, isPatch, type ActionGroup } from './coalesce-node-actions.ts';
import { driverDeletionBeside } from './driver-deletion-beside.ts';

export interface ExecuteHooks {
  readonly writer: ClusterWriter;
  readonly logger: Logger;
  /** The Node's uid from the cache, for Events' involvedObject. */
  readonly nodeUid: (name: string) => string | undefined;
  /** Read-your-writes: the Node as stored after each patch, newer than the cache for a moment. */
  readonly onNodeWritten: (node: V1Node) => void;
  /**
   * The Node as this replica last knew it (its own last write, or the cache), that a cordon
   * change is first tried against; undefined: read it from the API server.
   */
  readonly nodeAsKnown: (name: string) => V1Node | undefined;
  /** A cordon change was refused (422: a field it was made from changed since it was read); it is tried again on the Node read afresh, CORDON_WRITE_TRIES in all. */
  readonly onWriteConflict: (node: string) => void;
  /** HTTP 429 on eviction: reported back to the planner through the next snapshot. */
  readonly onEvictionBlocked: (pod: PodRef, message: string, node: string) => void;
  readonly onEvicted: (pod: PodRef) => void;
  /** A pod deletion was accepted (or found the pod gone): read-your-writes until the pod cache shows it. */
  readonly onPodDeleted: (pod: PodRef) => void;
  /** A state label was written (for the per-state and per-upgrade histograms). */
  readonly onStateWritten: (action: SetStateAction) => void;
  /** UIDs of the pods bound to the node as the pod cache has them now (requireSamePods). */
  readonly podUidsOn: (node: string) => readonly string[];
  /** Nodes worked on at once. */
  readonly concurrency: number;
  /**
   * Aborted when this replica stops leading: no further action starts (those in flight finish),
   * so a replica that lost the Lease stops writing well within the lease duration.
   */
  readonly signal?: AbortSignal;
  /** Longest wait for one API call; a hung one fails the node's list instead of stalling the pass. */
  readonly requestTimeoutMs?: number;
}

const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export interface ActionFailure {
  readonly node: string;
  readonly action: NodeAction['kind'];
  readonly message: string;
}

/**
 * Runs a plan's node plans, several nodes at once. Within one node the actions run in order and
 * the first failure drops the rest of that node's list: the next pass re-plans from what the
 * cluster then shows. Node-object actions up to the next pod action become one merge patch, with
 * the Events between them sent after it (coalesceNodeActions); a driver pod deletion may go
 * beside the patch before it (driverDeletionBeside). A requireSamePods check that finds other
 * pods on the node ends its list there, as done (the next pass plans from them). A refused
 * eviction (429) and a failed Event do not stop the list.
 */
export async function executePlan(nodePlans: readonly NodePlan[], hooks: ExecuteHooks): Promise<readonly ActionFailure[]> {
  const failures: ActionFailure[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const plan = nodePlans[next];
      next += 1;
      if (plan === undefined || hooks.signal?.aborted === true) return;
      const failure = await executeNodePlan(plan, hooks);
      if (failure !== undefined) failures.push(failure);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(hooks.concurrency, nodePlans.length)) }, worker));
  return failures;
}

/** Told once the first `after` actions of a node's list (Events not counted) are stored, or once the list ends short of them. */
export interface CountedWatch {
  readonly after: number;
  readonly reached: () => void;
}

/** What a caller of executeNodePlan is told as the list goes; each optional. */
export interface NodePlanWatch {
  /** Told as soon as the actions it names are answered (see countedPrefix), before the rest of the list. */
  readonly counted?: CountedWatch;
  /** Given, the list resolves without waiting for its Events, handing them over still under way. */
  readonly eventsBeside?: (events: Promise<void>) => void;
  /** Told once every action but the Events has gone through: the list neither failed nor ended short. */
  readonly completed?: () => void;
}

/**
 * One node's list. Events are sent without holding up the node's next write (they change nothing
 * the next action depends on, and a failed Event is only logged); the node's list resolves once
 * its Events are sent too, so a pass still ends with all its requests done; or, given
 * `watch.eventsBeside`, once its other actions are, handing it the Events still under way.
 */
export async function executeNodePlan(plan: NodePlan, hooks: ExecuteHooks, watch: NodePlanWatch = {}): Promise<ActionFailure | undefined> {
  const { counted } = watch;
  const events: Promise<void>[] = [];
  let done = 0;
  const tell = onceOnly(() => counted?.reached());
  /** Groups sent ahead of their turn (a driver pod deletion beside its patch: driverDeletionBeside), and their answers. */
  const sent = new Map<ActionGroup, Promise<ActionFailure | undefined>>();
  try {
    let wrote = false;
    const groups = coalesceNodeActions(plan.actions);
    for (const [at, group] of groups.entries()) {
      if (counted !== undefined && done >= counted.after) tell();
      const early = sent.get(group);
      if (early === undefined && !mayStart(group, wrote, hooks)) return undefined;
      if (!isPatch(group) && group.kind === 'requireSamePods') {
        // Not a failure: the next pass plans the node's steps from the pods there are now.
        if (!hasSamePods(group, hooks)) {
          hooks.logger.info({ node: plan.node }, 'the pods on the node changed between planning and the cordon; planning its next steps again');
          return undefined;
        }
        done += 1;
        continue;
      }
      wrote = isPatch(group) || (wrote && group.kind === 'emitEvent');
      if (!isPatch(group) && group.kind === 'emitEvent') {
        events.push(runGroup(plan.node, group, hooks).then(() => undefined));
        continue;
      }
      const deletion = driverDeletionBeside(groups, at);
      if (deletion !== undefined) sent.set(deletion, runGroup(plan.node, deletion, hooks));
      const failure = await (early ?? runGroup(plan.node, group, hooks));
      if (failure !== undefined) return failure;
      done += isPatch(group) ? group.length : 1;
    }
    watch.completed?.();
    return undefined;
  } finally {
    // A node is free once all its writes are answered, a deletion sent beside a failed patch too.
    await Promise.all(sent.values());
    tell();
    await handOver(events, watch.eventsBeside);
  }
}

function onceOnly(action: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    action();
  };
}

/** Waits for the list's Events, or hands those still under way to `eventsBeside` when given. */
async function handOver(events: readonly Promise<void>[], eventsBeside: NodePlanWatch['eventsBeside']): Promise<void> {
  if (eventsBeside === undefined) await Promise.all(events);
  else if (events.length > 0) eventsBeside(Promise.all(events).then(() => undefined));
}

/**
 * Leadership lost: start no further change. The Events that report a change already made
 * (`wrote`: the list's last write went through) are still recorded, or the history would miss a
 * transition for good (the next leader finds the state written and has nothing to report).
 */
function mayStart(group: ActionGroup, wrote: boolean, hooks: ExecuteHooks): boolean {
  return hooks.signal?.aborted !== true || (wrote && !isPatch(group) && group.kind === 'emitEvent');
}

function hasSamePods(check: RequireSamePodsAction, hooks: ExecuteHooks): boolean {
  const now = hooks.podUidsOn(check.node);
  if (now.length !== check.podUids.length) return false;
  const planned = new Set(check.podUids);
  return now.every((uid) => planned.has(uid));
}

/** What the coordinator logs (warn) for each action list that failed and is planned afresh by a later pass. */
export const ACTION_FAILED_MESSAGE = 'action failed; re-planning';

/** One patch or one other action, bounded by the request timeout; a failure as data. */
async function runGroup(node: string, group: ActionGroup, hooks: ExecuteHooks): Promise<ActionFailure | undefined> {
  const kind: NodeAction['kind'] = isPatch(group) ? (group[0]?.kind ?? 'setState') : group.kind;
  try {
    const timeoutMs = hooks.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (isPatch(group)) await withTimeout(patchNode(node, group, hooks), timeoutMs, `patch of node ${node}`);
    else await withTimeout(executeAction(group, hooks), timeoutMs, `${group.kind} on node ${node}`);
    return undefined;
  } catch (error) {
    hooks.logger.warn({ node, action: kind, err: toError(error) }, ACTION_FAILED_MESSAGE);
    return { node, action: kind, message: apiErrorMessage(error) };
  }
}

/** Tries of a cordon change against a Node read afresh after its guard was refused, before the node's list fails (the next pass plans it again). */
export const CORDON_WRITE_TRIES = 5;

async function patchNode(node: string, actions: readonly NodeObjectAction[], hooks: ExecuteHooks): Promise<void> {
  const stored = changesCordon(actions) ? await patchAgainstRead(node, actions, hooks) : await hooks.writer.patchNode(node, nodePatchOf(actions));
  hooks.onNodeWritten(stored);
  for (const a of actions) {
    if (a.kind === 'setState') {
      hooks.onStateWritten(a);
      hooks.logger.info({ node, from: a.from, to: a.to }, 'node state changed');
    }
  }
}

/**
 * A patch with a cordon change, made against the Node as known and guarded by what it was made
 * from (guardedNodePatch). Refused (422) because one of those changed (another coordinator's
 * cordon, an admin's uncordon), it reads the Node afresh and makes the change against that,
 * never over it. A 422 for anything else is thrown: made again from the Node read afresh, the
 * patch is the one refused.
 */
async function patchAgainstRead(node: string, actions: readonly NodeObjectAction[], hooks: ExecuteHooks): Promise<V1Node> {
  let read = hooks.nodeAsKnown(node);
  const starts = startsUpgrade(actions);
  for (let tries = 1; ; tries++) {
    read ??= await hooks.writer.readNode(node);
    // The planner started a Ready node; one NotReady by now (the cache, or the read after a
    // refusal, shows it) is not started: the list fails and the next pass plans the node afresh.
    if (starts && nodeFactsOf(read).notReady !== null) throw new NotReadyAtStart(node);
    const patch = guardedNodePatch(actions, asRead(node, read));
    try {
      return await hooks.writer.patchNodeGuarded(node, patch);
    } catch (error) {
      if (!isInvalid(error)) throw error;
      read = await hooks.writer.readNode(node);
      if (isDeepStrictEqual(guardedNodePatch(actions, asRead(node, read)), patch)) throw error;
      hooks.onWriteConflict(node);
      if (tries >= CORDON_WRITE_TRIES) throw error;
    }
  }
}

/** A start not sent: its node turned NotReady between the plan and the write. */
export class NotReadyAtStart extends DriverRolloutError {
  constructor(node: string) {
    super(`node ${node} turned NotReady before its start was sent; not started`, { node });
  }
}

function asRead(name: string, node: V1Node): NodeAsRead {
  const conditions = node.status?.conditions ?? [];
  const ready = conditions.findIndex((c) => c.type === 'Ready');
  return {
    name,
    unschedulable: node.spec?.unschedulable,
    labels: node.metadata?.labels,
    annotations: node.metadata?.annotations,
    readyAt: ready >= 0 && conditions[ready]?.status === 'True' ? ready : undefined,
  };
}

async function executeAction(action: NodeAction, hooks: ExecuteHooks): Promise<void> {
  switch (action.kind) {
    case 'deletePod':
    case 'deleteDriverPod':
      await hooks.writer.deletePod(action.pod);
      hooks.onPodDeleted(action.pod);
      hooks.logger.info({ node: action.node, pod: `${action.pod.namespace}/${action.pod.name}`, action: action.kind }, 'pod deleted');
      return;
    case 'evictPod': {
      const result = await hooks.writer.evictPod(action.pod);
      if (result.evicted) hooks.onEvicted(action.pod);
      else hooks.onEvictionBlocked(action.pod, result.message, action.node);
      return;
    }
    case 'requireSamePods':
      // A check, made in order by executeNodePlan; nothing to send.
      return;
    case 'emitEvent':
      try {
        await hooks.writer.emitEvent({
          target: { kind: 'Node', name: action.node, namespace: '', uid: hooks.nodeUid(action.node), apiVersion: 'v1' },
          type: action.type,
          reason: action.reason,
          message: action.message,
        });
      } catch (error) {
        hooks.logger.warn({ node: action.node, err: toError(error) }, 'could not record event');
      }
      return;
    default:
      // Node-object actions arrive grouped (see coalesceNodeActions); one alone is a one-action patch.
      await patchNode(action.node, [action], hooks);
  }
}
