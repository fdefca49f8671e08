import type { NodeAction, NodePlan } from '../plan/action.ts';
import { executeNodePlan, type ActionFailure, type ExecuteHooks } from './execute-plan.ts';
import { countedPrefix } from './may-raise-counts.ts';
import { isInProgress, isStartOfUpgrade } from '../plan/pool-capacity.ts';
import { DriverRolloutError } from '../../shared/errors.ts';

interface Queued {
  readonly plan: NodePlan;
  readonly hooks: ExecuteHooks;
  readonly settled: (failure: ActionFailure | undefined) => void;
  /** Actions (Events not counted) a pass must see stored before it hands out slots; 0: none. */
  readonly countedAfter: number;
  readonly counted: () => void;
  /** Told whether the plan was carried out in full (for the plans that wait on it: NodePlan.after). */
  readonly outcome: (complete: boolean) => void;
}

/**
 * Marks (the idle lane) written at once while a plan that moves an upgrade is under way. They
 * change no count and no step, but every write shares the API server with the wave's next steps,
 * so they go out slowly while a wave moves: their labels and Events come later, the upgrade does
 * not (docs/decisions/0001-writes-beside-the-passes.md).
 */
export const MARKS_WHILE_MOVING = 2;

/**
 * Node plans carried out beside the passes: a slow write on one node then holds back neither
 * the pass nor the other nodes' next steps. A node stays busy from `start` until its plan is
 * carried out; the reconciler plans nothing for a busy node.
 *
 * A plan that may raise a limited count (countedPrefix) is told apart: until its raising writes
 * are answered, they are listed by `raisingActions`, which every pass overlays on its snapshot,
 * so the passes count them without waiting for them (`start` resolves once they are answered).
 * Such plans have a lane of their own, so they never queue behind plans that only lower counts.
 * At most `concurrency` plans run at once per lane; the rest wait in order.
 * Plans that move no upgrade along (movesUpgrade: a node marked upgrade-required, a waiting
 * node's reason or timer) have a lane of their own too: when a new revision marks a thousand
 * nodes, the first wave's next steps must not queue behind those marks; that lane gets only the
 * places the other two leave, and at most MARKS_WHILE_MOVING of them while either runs. A mark
 * still queued never holds a node back: a plan that moves the node's upgrade (its start, planned
 * from a newer snapshot and so writing the mark itself) takes its place (`mayStart`).
 *
 * A node is free again once its writes are answered: its Events (which change nothing a plan
 * reads) may still be under way; `idle` waits for them too.
 *
 * A pass's plans start together (`startPlans`). One that names another node in `after` (it took
 * the slot that node's plan gives back: plan/slot-release.ts) is busy and counted from then on,
 * but joins its lane only once that plan has been carried out in full; if that plan fails, ends
 * short or did not start (its node was busy), the waiting plan is dropped and settles as done, so
 * the next pass plans its node afresh. The two plans never share a lane's places while one waits.
 * Why the lanes and their sizes: docs/decisions/0001-writes-beside-the-passes.md.
 */
export class NodePlansInFlight {
  readonly #concurrency: number;
  readonly #busy = new Set<string>();
  readonly #lanes = { counted: new Lane(), beside: new Lane(), idle: new Lane() };
  readonly #events = new Set<Promise<void>>();
  /** Plans waiting for another node's plan before they join their lane (NodePlan.after). */
  readonly #waiting = new Set<Promise<void>>();
  /** Per node, its plan while it waits for another node's plan (NodePlan.after); gone once it joins its lane or is dropped. */
  readonly #gated = new Map<string, Queued>();
  /** Per node, the actions of a plan under way that may raise a limited count and are not stored yet (countedPrefix). */
  readonly #raising = new Map<string, readonly NodeAction[]>();

  constructor(concurrency: number) {
    this.#concurrency = Math.max(1, concurrency);
  }

  isBusy(node: string): boolean {
    return this.#busy.has(node);
  }

  /**
   * Whether `plan` may start now: nothing is under way on its node, or only a plan of the idle
   * lane that has not started (a mark queued behind others) while `plan` moves the upgrade.
   * `start` then drops the queued plan unsettled: `plan` was made from a newer snapshot, in which
   * that plan's writes are not stored, so it carries them itself. Without this, a slot the planner
   * hands to a node whose mark is still queued would stay unused until the mark is written.
   */
  mayStart(plan: NodePlan): boolean {
    if (!this.#busy.has(plan.node)) return true;
    return this.#laneOf(plan) !== this.#lanes.idle && this.#lanes.idle.queue.some((q) => q.plan.node === plan.node);
  }

  /**
   * Carries out `plan` in the background; `settled` gets its failure (undefined when it went
   * through). Resolves once the writes the next pass must count are stored (or the list ended
   * short of them: failed, or leadership lost); at once for a plan that raises no count.
   */
  start(plan: NodePlan, hooks: ExecuteHooks, settled: (failure: ActionFailure | undefined) => void): Promise<void> {
    return this.#start(plan, hooks, settled, undefined, () => undefined);
  }

  /**
   * Starts the plans of one pass that may start (mayStart), each as `start` does, a plan with
   * `after` once the plan of that node among them has been carried out in full (see above); one
   * whose `after` names a plan that waits itself is dropped. `settled` gets each started plan
   * and its failure.
   */
  startPlans(plans: readonly NodePlan[], hooks: ExecuteHooks, settled: (plan: NodePlan, failure: ActionFailure | undefined) => void): void {
    const starting = plans.filter((p) => this.mayStart(p));
    const outcomes = new Map(starting.map((p) => [p.node, Promise.withResolvers<boolean>()]));
    // Only a plan that waits on none may be waited on: plans waiting on each other would never run.
    const waitsOnNone = new Set(starting.filter((p) => p.after === undefined).map((p) => p.node));
    for (const plan of starting) {
      const after = plan.after;
      const gate = after === undefined ? undefined : ((waitsOnNone.has(after) ? outcomes.get(after)?.promise : undefined) ?? Promise.resolve(false));
      void this.#start(plan, hooks, (failure) => { settled(plan, failure); }, gate, (complete) => outcomes.get(plan.node)?.resolve(complete));
    }
  }

  #start(plan: NodePlan, hooks: ExecuteHooks, settled: Queued['settled'], gate: Promise<boolean> | undefined, outcome: Queued['outcome']): Promise<void> {
    if (this.#busy.has(plan.node)) this.#dropQueuedMark(plan);
    this.#busy.add(plan.node);
    const countedAfter = countedPrefix(plan);
    const lane = this.#laneOf(plan);
    if (countedAfter > 0) this.#raising.set(plan.node, leadingActions(plan, countedAfter));
    return new Promise<void>((counted) => {
      const stored = (): void => {
        this.#raising.delete(plan.node);
        counted();
      };
      if (countedAfter === 0) counted();
      const queued: Queued = { plan, hooks, settled, countedAfter, counted: stored, outcome };
      if (gate === undefined) {
        this.#enqueue(lane, queued);
        return;
      }
      this.#gated.set(plan.node, queued);
      const waiting = gate.then((go) => {
        this.#waiting.delete(waiting);
        if (this.#gated.get(plan.node) !== queued) return; // revoked while it waited: already finished
        this.#gated.delete(plan.node);
        if (go) this.#enqueue(lane, queued);
        else {
          hooks.logger.info({ node: plan.node, after: plan.after }, 'the node whose slot this plan took has not given it back; planning the node again');
          this.#finish(queued, undefined, false);
        }
      });
      this.#waiting.add(waiting);
    });
  }

  #enqueue(lane: Lane, queued: Queued): void {
    lane.queue.push(queued);
    this.#pump();
  }

  /** The plan is over (carried out, failed, or dropped before it began): its node is free. */
  #finish(queued: Queued, failure: ActionFailure | undefined, complete: boolean): void {
    queued.counted(); // a list that threw before telling: the pass must not wait forever
    this.#busy.delete(queued.plan.node);
    queued.outcome(complete && failure === undefined);
    queued.settled(failure);
  }

  /**
   * Nodes whose start (a setState of `labelKey` out of upgrade-required) is planned and not sent:
   * waiting for the plan whose slot it took, or queued in its lane. A pass hands them to the
   * planner (ClusterSnapshot.pendingStarts), which names those a start check holds now.
   */
  pendingStarts(labelKey: string): string[] {
    const queued = [...this.#gated.values(), ...this.#lanes.counted.queue, ...this.#lanes.beside.queue];
    return queued.filter((q) => isStartOf(q.plan, labelKey)).map((q) => q.plan.node);
  }

  /**
   * Drops the starts (under `labelKey`) of `nodes` that are not sent yet (a newer pass would hold them:
   * Plan.revokedStarts); each settles as done, so its node is planned afresh. Returns the nodes
   * whose start it dropped; a start already being sent is left to finish.
   */
  revokeStarts(nodes: Iterable<string>, labelKey: string): string[] {
    const dropped: string[] = [];
    for (const node of nodes) {
      const gated = this.#gated.get(node);
      if (gated !== undefined) {
        if (!isStartOf(gated.plan, labelKey)) continue;
        this.#gated.delete(node);
        this.#finish(gated, undefined, false);
        dropped.push(node);
        continue;
      }
      for (const lane of [this.#lanes.counted, this.#lanes.beside]) {
        const i = lane.queue.findIndex((q) => q.plan.node === node);
        const queued = lane.queue[i];
        if (queued === undefined || !isStartOf(queued.plan, labelKey)) continue;
        lane.queue.splice(i, 1);
        this.#finish(queued, undefined, false);
        dropped.push(node);
      }
    }
    return dropped;
  }

  /**
   * The writes under way that may raise a limited count and are not answered yet (a start's
   * first patch), for a pass to overlay on its snapshot (applyActions): the pass then counts
   * those nodes as the writes will leave them, without waiting for the writes. A write that
   * fails leaves fewer nodes out of service than counted, never more.
   */
  raisingActions(): NodeAction[] {
    return [...this.#raising.values()].flat();
  }

  /** Resolves once nothing is queued or running (e.g. before a replica that stopped leading returns). */
  async idle(): Promise<void> {
    const running = (): Promise<void>[] => [...this.#waiting, ...this.#lanes.counted.running, ...this.#lanes.beside.running, ...this.#lanes.idle.running, ...this.#events];
    while (running().length > 0) await Promise.all(running());
  }

  #laneOf(plan: NodePlan): Lane {
    if (countedPrefix(plan) > 0) return this.#lanes.counted;
    return movesUpgrade(plan) ? this.#lanes.beside : this.#lanes.idle;
  }

  /** Removes the queued idle-lane plan of `plan`'s node, which `plan` takes over (mayStart). */
  #dropQueuedMark(plan: NodePlan): void {
    const queue = this.#lanes.idle.queue;
    const i = queue.findIndex((q) => q.plan.node === plan.node);
    if (i === -1 || this.#laneOf(plan) === this.#lanes.idle) {
      throw new DriverRolloutError(`node ${plan.node} already has a plan under way that this one may not take over (check mayStart first)`, { node: plan.node });
    }
    queue.splice(i, 1);
  }

  #pump(): void {
    for (const lane of [this.#lanes.counted, this.#lanes.beside, this.#lanes.idle]) {
      while (lane.running.size < this.#room(lane)) {
        const next = lane.queue.shift();
        if (next === undefined) break;
        let complete = false;
        const run = executeNodePlan(next.plan, next.hooks, {
          ...(next.countedAfter > 0 ? { counted: { after: next.countedAfter, reached: next.counted } } : {}),
          eventsBeside: (events) => {
            this.#events.add(events);
            void events.finally(() => this.#events.delete(events));
          },
          completed: () => {
            complete = true;
          },
        })
          .catch((error: unknown): ActionFailure => ({ node: next.plan.node, action: next.plan.actions[0]?.kind ?? 'setState', message: String(error) }))
          .then((failure) => {
            lane.running.delete(run);
            this.#finish(next, failure, complete);
            this.#pump();
          });
        lane.running.add(run);
      }
    }
  }

  /**
   * Plans a lane may run at once: `concurrency`; the idle lane only the places the lanes that
   * move upgrades leave (at least one, so marks are never starved), and no more than
   * MARKS_WHILE_MOVING while any of them runs, so a thousand marks do not hold the API server's
   * attention while a wave's next steps wait for their answers.
   */
  #room(lane: Lane): number {
    if (lane !== this.#lanes.idle) return this.#concurrency;
    const moving = this.#lanes.counted.running.size + this.#lanes.beside.running.size;
    const left = Math.max(1, this.#concurrency - moving);
    return moving === 0 ? left : Math.min(MARKS_WHILE_MOVING, left);
  }
}

class Lane {
  readonly queue: Queued[] = [];
  readonly running = new Set<Promise<void>>();
}

/** Whether the plan starts its node's upgrade under `labelKey`: it moves the node out of upgrade-required into the upgrade. */
function isStartOf(plan: NodePlan, labelKey: string): boolean {
  return plan.actions.some((a) => a.kind === 'setState' && a.labelKey === labelKey && isStartOfUpgrade(a.from, a.to));
}

/** The plan's actions up to its `count`-th that is not an Event. */
function leadingActions(plan: NodePlan, count: number): readonly NodeAction[] {
  let seen = 0;
  const end = plan.actions.findIndex((a) => a.kind !== 'emitEvent' && ++seen === count);
  return plan.actions.slice(0, end + 1);
}

/**
 * Whether a plan moves an upgrade along: a state change into, out of or within the upgrading
 * states in progress (cordon-required … uncordon-required), a cordon or uncordon, a label, or a pod action
 * (a deletion, an eviction, a safe-load release). Otherwise it is bookkeeping of a node that waits
 * or is done: the upgrade-required mark, a reason, a timer.
 */
export function movesUpgrade(plan: NodePlan): boolean {
  return plan.actions.some((a) => {
    if (a.kind === 'setState') return isInProgress(a.from) || isInProgress(a.to);
    return a.kind !== 'emitEvent' && a.kind !== 'setAnnotation' && a.kind !== 'removeAnnotation';
  });
}
