/**
 * Node runs a timer longer than this (about 24.8 days) after 1 ms (TimeoutOverflowWarning): a
 * deadline further away (a DriverRollout timeout of 30 days) would wake the loop every
 * millisecond. Such a deadline wakes it once at this distance; that pass arms it again.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Coalesces triggers into wake-ups: many triggers within `debounceMs` wake the loop once, and a
 * trigger during a pass wakes it again right after (single flight, nothing lost). A timer can
 * be armed for a deadline; only the earliest pending one is kept.
 */
export class WakeSignal {
  private readonly debounceMs: number;
  /** The last pass's duration (pace): triggers are coalesced over at least that long. */
  private paceMs = 0;
  private pending = false;
  private waiter: (() => void) | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private deadline: { at: number; timer: NodeJS.Timeout } | undefined;

  constructor(debounceMs: number) {
    this.debounceMs = debounceMs;
  }

  trigger(): void {
    if (this.debounce !== undefined) return;
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      this.fire();
    }, Math.max(this.debounceMs, this.paceMs));
  }

  /**
   * Tells how long the last pass took: the triggers that come after it are coalesced over at
   * least as long, so that passes take at most about half of the process's time however often
   * they are triggered (no pass waits for a write; on a large cluster a pass may cost more than
   * the debounce). Deadlines are not delayed.
   */
  pace(lastPassMs: number): void {
    this.paceMs = Math.max(0, lastPassMs);
  }

  /** Wake at `atMs` (ms since epoch) unless an earlier wake-up is already armed. */
  wakeAt(atMs: number, nowMs: number): void {
    if (this.deadline !== undefined && this.deadline.at <= atMs) return;
    if (this.deadline !== undefined) clearTimeout(this.deadline.timer);
    const timer = setTimeout(() => {
      this.deadline = undefined;
      this.fire();
    }, Math.min(MAX_TIMER_MS, Math.max(0, atMs - nowMs)));
    this.deadline = { at: atMs, timer };
  }

  /** Resolves at the next wake-up (at once if one is pending) or when `signal` aborts. */
  wait(signal: AbortSignal): Promise<void> {
    if (this.pending || signal.aborted) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        signal.removeEventListener('abort', done);
        this.waiter = undefined;
        this.pending = false;
        resolve();
      };
      this.waiter = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  dispose(): void {
    clearTimeout(this.debounce);
    if (this.deadline !== undefined) clearTimeout(this.deadline.timer);
    this.debounce = undefined;
    this.deadline = undefined;
  }

  private fire(): void {
    this.pending = true;
    this.waiter?.();
  }
}
