import { vi } from 'vitest';

/**
 * Under `vi.useFakeTimers()`: advances the fake clock in `stepMs` steps (running every timer and
 * the promise jobs they start) until `predicate` holds, and returns the fake time that took.
 * Times measured this way are exact and independent of machine load, so a test may assert them.
 */
export async function advanceUntil(predicate: () => boolean, limitMs: number, stepMs = 5): Promise<number> {
  let elapsed = 0;
  while (!predicate()) {
    if (elapsed >= limitMs) throw new Error(`condition not met within ${limitMs} ms of fake time`);
    await vi.advanceTimersByTimeAsync(stepMs);
    elapsed += stepMs;
  }
  return elapsed;
}
