import type { ClusterEvent } from './cluster-writer.ts';

export interface EventQueueOptions {
  /** Events under way at once. */
  readonly concurrency: number;
  /** Events waiting at most: beyond it the oldest waiting Normal Event is dropped (a Warning only when no Normal one waits). */
  readonly capacity: number;
  /** The time an Event is raised at, when it does not carry one. */
  readonly now: () => Date;
  /** An Event given up: the queue was full, or closed before it went out. */
  readonly onDropped: (event: ClusterEvent, why: 'full' | 'closed') => void;
  /** An Event the API server did not take; the queue goes on with the next. */
  readonly onFailed: (event: ClusterEvent, error: unknown) => void;
  /** The Events waiting or under way, whenever that changes. */
  readonly onSize?: (size: number) => void;
}

/** Two at a time; room for a 10,000-node revision's upgrade-required marks. */
export const DEFAULT_EVENT_QUEUE = { concurrency: 2, capacity: 10_000 } as const;

/**
 * Events go out beside the writes that move upgrades, a few at a time, so that a burst of them
 * never competes at the API server with the writes a wave waits for: a new revision marks every
 * node upgrade-required with an Event each, and every step of every node in a wave raises one
 * (docs/decisions/0003-fewer-writes-per-node.md).
 *
 * `emit` returns at once. Each Event keeps the time it was raised (`at`), so `kubectl get events`
 * orders them as they happened whenever they are sent. Warnings go before waiting Normal Events.
 * When `capacity` Events wait, the oldest Normal one is dropped, as client-go's recorder drops
 * rather than grows without bound.
 */
export class EventQueue {
  readonly #send: (event: ClusterEvent) => Promise<void>;
  readonly #options: EventQueueOptions;
  readonly #warnings = new Fifo<ClusterEvent>();
  readonly #normal = new Fifo<ClusterEvent>();
  #running = 0;
  #closed = false;
  #drained: (() => void)[] = [];

  constructor(send: (event: ClusterEvent) => Promise<void>, options: EventQueueOptions) {
    this.#send = send;
    this.#options = options;
  }

  /** Events waiting or under way. */
  get size(): number {
    return this.#warnings.length + this.#normal.length + this.#running;
  }

  /** Queues `event`, stamped with the time now unless it carries one; sent once the Events ahead of it are under way. */
  emit(event: ClusterEvent): void {
    const stamped = event.at === undefined ? { ...event, at: this.#options.now() } : event;
    if (this.#closed) {
      this.#options.onDropped(stamped, 'closed');
      return;
    }
    if (this.#warnings.length + this.#normal.length >= this.#options.capacity) {
      const oldest = this.#normal.shift() ?? this.#warnings.shift();
      if (oldest !== undefined) this.#options.onDropped(oldest, 'full');
    }
    (stamped.type === 'Warning' ? this.#warnings : this.#normal).push(stamped);
    this.#pump();
  }

  /**
   * Takes no more Events and resolves once those queued are sent, or after `timeoutMs`, dropping
   * the ones still waiting then: the number dropped.
   */
  async close(timeoutMs: number): Promise<number> {
    this.#closed = true;
    if (this.size > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.#drained.push(resolve)),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    }
    let dropped = 0;
    for (const queue of [this.#warnings, this.#normal]) {
      for (let event = queue.shift(); event !== undefined; event = queue.shift()) {
        this.#options.onDropped(event, 'closed');
        dropped += 1;
      }
    }
    this.#options.onSize?.(this.size);
    return dropped;
  }

  #pump(): void {
    while (this.#running < this.#options.concurrency) {
      const next = this.#warnings.shift() ?? this.#normal.shift();
      if (next === undefined) break;
      this.#running += 1;
      void this.#send(next)
        .catch((error: unknown) => {
          this.#options.onFailed(next, error);
        })
        .finally(() => {
          this.#running -= 1;
          this.#pump();
        });
    }
    this.#options.onSize?.(this.size);
    if (this.size === 0) for (const resolve of this.#drained.splice(0)) resolve();
  }
}

/** A first-in first-out queue whose shift does not move the rest (a revision may queue thousands). */
class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head += 1;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}
