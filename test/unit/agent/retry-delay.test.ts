import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { retryDelay } from '../../../agent/retry-delay.ts';

const retry = { initialMs: 10_000, maxMs: 300_000 };

describe('retryDelay', () => {
  it.each([
    [1, 10_000],
    [2, 20_000],
    [3, 40_000],
    [5, 160_000],
    [6, 300_000],
    [50, 300_000],
  ])('after %d failures (no jitter): %d ms', (attempt, ms) => {
    expect(retryDelay(attempt, retry, 0)).toBe(ms);
  });

  it('stays within [80 %, 100 %] of the capped doubling, whatever the jitter', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempt, random) => {
        const base = Math.min(retry.maxMs, retry.initialMs * 2 ** (attempt - 1));
        const d = retryDelay(attempt, retry, random);
        expect(d).toBeGreaterThanOrEqual(Math.floor(base * 0.8));
        expect(d).toBeLessThanOrEqual(base);
      }),
    );
  });
});
