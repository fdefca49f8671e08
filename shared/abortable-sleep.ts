/**
 * Waits `ms`, or less when `signal` aborts first: resolves `'elapsed'` or `'aborted'` and never
 * rejects, so a caller decides what an abort means (stop quietly, or throw abortReason). The
 * timer and the abort listener are both released either way.
 */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<'elapsed' | 'aborted'> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve('aborted');
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve('aborted');
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve('elapsed');
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Resolves when `signal` aborts (at once if it already has). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    signal.addEventListener('abort', () => { resolve(); }, { once: true });
  });
}

/** The signal's reason as an Error (AbortSignal reasons can be anything). */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(`aborted: ${String(reason)}`);
}

/** `signal.aborted` read through a call: the signal flips while awaiting, which TypeScript's narrowing cannot see. */
export function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}
