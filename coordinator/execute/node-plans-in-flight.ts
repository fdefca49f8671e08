import type { NodePlan } from '../plan/action.ts';
import { executePlan, type ActionFailure, type ExecuteHooks } from './execute-plan.ts';

interface Queued {
  readonly plan: NodePlan;
  readonly hooks: ExecuteHooks;
  readonly settled: (failure: ActionFailure | undefined) => void;
}

/**
 * Node plans carried out beside the passes instead of within one (see mayRaiseCounts for which):
 * a slow write on one node then holds back neither the pass nor the other nodes' next steps. A
 * node stays busy from `start` until its plan is carried out; the reconciler plans nothing for a
 * busy node. At most `concurrency` plans run at once; the rest wait in order.
 */
export class NodePlansInFlight {
  readonly #concurrency: number;
  readonly #busy = new Set<string>();
  readonly #queue: Queued[] = [];
  readonly #running = new Set<Promise<void>>();

  constructor(concurrency: number) {
    this.#concurrency = Math.max(1, concurrency);
  }

  isBusy(node: string): boolean {
    return this.#busy.has(node);
  }

  /** Carries out `plan` in the background; `settled` gets its failure (undefined when it went through). */
  start(plan: NodePlan, hooks: ExecuteHooks, settled: (failure: ActionFailure | undefined) => void): void {
    this.#busy.add(plan.node);
    this.#queue.push({ plan, hooks, settled });
    this.#pump();
  }

  /** Resolves once nothing is queued or running (e.g. before a replica that stopped leading returns). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running);
  }

  #pump(): void {
    while (this.#running.size < this.#concurrency) {
      const next = this.#queue.shift();
      if (next === undefined) return;
      const run = executePlan([next.plan], { ...next.hooks, concurrency: 1 }).then(
        (failures) => failures[0],
        (error: unknown): ActionFailure => ({ node: next.plan.node, action: next.plan.actions[0]?.kind ?? 'setState', message: String(error) }),
      ).then((failure) => {
        this.#busy.delete(next.plan.node);
        this.#running.delete(run);
        next.settled(failure);
        this.#pump();
      });
      this.#running.add(run);
    }
  }
}
