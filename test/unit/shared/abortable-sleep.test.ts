import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { abortableSleep, abortReason, untilAborted } from '../../../shared/abortable-sleep.ts';

// A fake clock: nothing here depends on how fast the machine is.
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** The promise's outcome so far, without waiting for it. */
async function stateOf<T>(promise: Promise<T>): Promise<T | 'pending'> {
  return await Promise.race([promise, Promise.resolve('pending' as const)]);
}

describe('abortableSleep', () => {
  it('resolves "elapsed" once the time has passed, not before', async () => {
    const sleep = abortableSleep(1000);
    await vi.advanceTimersByTimeAsync(999);
    expect(await stateOf(sleep)).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(await sleep).toBe('elapsed');
  });

  it('resolves "aborted" as soon as the signal aborts, and leaves no timer behind', async () => {
    const stop = new AbortController();
    const sleep = abortableSleep(60_000, stop.signal);
    await vi.advanceTimersByTimeAsync(10);
    stop.abort(new Error('SIGTERM'));
    expect(await sleep).toBe('aborted');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolves "aborted" at once for a signal that has already aborted', async () => {
    expect(await abortableSleep(60_000, AbortSignal.abort())).toBe('aborted');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('removes its abort listener when the time passes', async () => {
    const stop = new AbortController();
    const sleep = abortableSleep(5, stop.signal);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(5);
    expect(await sleep).toBe('elapsed');
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });
});

describe('untilAborted', () => {
  it('waits for the abort', async () => {
    const stop = new AbortController();
    const wait = untilAborted(stop.signal);
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(await stateOf(wait)).toBe('pending');
    stop.abort();
    await expect(wait).resolves.toBeUndefined();
  });
});

describe('abortReason', () => {
  it('keeps an Error reason and wraps anything else', () => {
    const error = new Error('SIGTERM');
    expect(abortReason(AbortSignal.abort(error))).toBe(error);
    expect(abortReason(AbortSignal.abort('bye')).message).toBe('aborted: bye');
  });
});
