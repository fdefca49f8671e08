import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelay, DEFAULT_BACKOFF } from '../../../init-container/backoff.ts';

describe('backoffDelay', () => {
  it.each([
    { attempt: 0, expected: 200 },
    { attempt: 1, expected: 400 },
    { attempt: 4, expected: 3200 },
    { attempt: 6, expected: 10_000 },
    { attempt: 60, expected: 10_000 },
  ])('grows from 200 ms and caps at 10 s (attempt $attempt → $expected ms without jitter)', ({ attempt, expected }) => {
    expect(backoffDelay(attempt, DEFAULT_BACKOFF, () => 0.5)).toBe(expected);
  });

  it('stays within ±jitter of the base delay, never negative, never above the jittered cap', () => {
    fc.assert(
      fc.property(fc.nat(100), fc.double({ min: 0, max: 0.9999, noNaN: true }), (attempt, r) => {
        const base = Math.min(DEFAULT_BACKOFF.maxMs, DEFAULT_BACKOFF.initialMs * 2 ** attempt);
        const delay = backoffDelay(attempt, DEFAULT_BACKOFF, () => r);
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base * (1 - DEFAULT_BACKOFF.jitter)));
        expect(delay).toBeLessThanOrEqual(Math.ceil(base * (1 + DEFAULT_BACKOFF.jitter)));
      }),
    );
  });
});
