/**
 * Pushes a value to somewhere slow and fallible (the API server), where only the latest value
 * matters: while one write is in flight, newer values replace each other and the last one is
 * written next. A failed write is retried after a delay unless a newer value arrived, which is
 * then written at once. Nothing here throws: failures go to `onError`.
 */
export interface LatestWinsWriter<T> {
  set(value: T): void;
  /** Resolves true once every value set so far is written, false if `timeoutMs` passes first. */
  flush(timeoutMs: number): Promise<boolean>;
  /** Stops retrying; a write in flight finishes on its own. */
  stop(): void;
}

export interface LatestWinsOptions {
  /** Delay before retry number `attempt` (1-based) of a failed write. */
  readonly retryDelayMs: (attempt: number) => number;
  readonly onError: (error: unknown, attempt: number) => void;
}

export function createLatestWinsWriter<T>(
  write: (value: T) => Promise<void>,
  options: LatestWinsOptions,
): LatestWinsWriter<T> {
  let pending: { value: T } | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  let wake: (() => void) | undefined;
  // Read through functions: both change while a write is awaited, which TypeScript's narrowing cannot see.
  const isStopped = () => stopped;
  const hasPending = () => pending !== undefined;
  const idleWaiters = new Set<(written: boolean) => void>();

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  async function drain(): Promise<void> {
    let attempt = 0;
    while (pending !== undefined && !stopped) {
      const { value } = pending;
      pending = undefined;
      try {
        await write(value);
        attempt = 0;
      } catch (error) {
        attempt += 1;
        options.onError(error, attempt);
        // A newer value that arrived meanwhile is written at once; otherwise retry this one later.
        if (!hasPending()) {
          pending = { value };
          if (!isStopped()) await sleep(options.retryDelayMs(attempt));
        }
      }
    }
  }

  function kick(): void {
    if (running !== undefined || stopped) return;
    running = drain().finally(() => {
      running = undefined;
      if (pending !== undefined && !stopped) kick();
      else for (const resolve of idleWaiters) resolve(pending === undefined);
    });
  }

  return {
    set(value) {
      pending = { value };
      wake?.();
      kick();
    },
    flush(timeoutMs) {
      if (running === undefined) return Promise.resolve(pending === undefined);
      return new Promise<boolean>((resolve) => {
        const onIdle = (written: boolean) => {
          clearTimeout(timer);
          idleWaiters.delete(onIdle);
          resolve(written);
        };
        const timer = setTimeout(() => {
          idleWaiters.delete(onIdle);
          resolve(false);
        }, timeoutMs);
        idleWaiters.add(onIdle);
      });
    },
    stop() {
      stopped = true;
      wake?.();
    },
  };
}
