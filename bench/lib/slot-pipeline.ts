/**
 * The order in which the rollout bench's pipelined floor replaces driver pods: `slots` nodes at
 * a time, in the given order, the next one started as soon as any running one is done, as a
 * controller with no bookkeeping at all would hand out a freed slot. Pure: the bench deletes
 * and watches; this only says which node goes next.
 */
export class SlotPipeline {
  readonly #waiting: string[];
  readonly #running = new Set<string>();
  readonly #slots: number;
  #done = 0;
  readonly #total: number;

  constructor(nodes: readonly string[], slots: number) {
    if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`slots must be a positive integer, got ${String(slots)}`);
    this.#waiting = [...nodes];
    this.#slots = slots;
    this.#total = nodes.length;
  }

  /** The first nodes to start: as many as there are slots (fewer on a small fleet). */
  start(): string[] {
    const first: string[] = [];
    while (this.#running.size < this.#slots && this.#waiting.length > 0) first.push(this.#take());
    return first;
  }

  isRunning(node: string): boolean {
    return this.#running.has(node);
  }

  /** `node` is done: the node to start in its slot, if any is left. A node not running is ignored. */
  done(node: string): string | undefined {
    if (!this.#running.delete(node)) return undefined;
    this.#done += 1;
    return this.#waiting.length > 0 ? this.#take() : undefined;
  }

  /** Every node started and done. */
  finished(): boolean {
    return this.#done === this.#total;
  }

  /** Nodes running now, for a timeout's message. */
  running(): readonly string[] {
    return [...this.#running];
  }

  #take(): string {
    const node = this.#waiting.shift() as string;
    this.#running.add(node);
    return node;
  }
}
