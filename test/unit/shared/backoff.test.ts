import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelay, type BackoffPolicy } from '../../../shared/backoff.ts';
import { DEFAULT_BACKOFF } from '../../../init-container/default-backoff.ts';

describe('backoffDelay, jitter spread either way (the init container)', () => {
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
    const jitter = DEFAULT_BACKOFF.jitter ?? 0;
    fc.assert(
      fc.property(fc.nat(100), fc.double({ min: 0, max: 0.9999, noNaN: true }), (attempt, r) => {
        const base = Math.min(DEFAULT_BACKOFF.maxMs, DEFAULT_BACKOFF.initialMs * 2 ** attempt);
        const delay = backoffDelay(attempt, DEFAULT_BACKOFF, () => r);
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base * (1 - jitter)));
        expect(delay).toBeLessThanOrEqual(Math.ceil(base * (1 + jitter)));
      }),
    );
  });

  it('reaches both ends of the spread', () => {
    expect(backoffDelay(2, DEFAULT_BACKOFF, () => 0)).toBe(640);
    expect(backoffDelay(2, DEFAULT_BACKOFF, () => 0.999_999)).toBe(960);
  });
});

describe('backoffDelay, jitter only shortening (the agent: the maximum stays a maximum)', () => {
  const retry: BackoffPolicy = { initialMs: 10_000, maxMs: 300_000, jitter: 0.2, jitterMode: 'shorten' };

  it.each([
    [1, 10_000],
    [2, 20_000],
    [3, 40_000],
    [5, 160_000],
    [6, 300_000],
    [50, 300_000],
  ])('after %d failures (no jitter): %d ms', (failures, ms) => {
    expect(backoffDelay(failures - 1, retry, () => 0)).toBe(ms);
  });

  it('stays within [80 %, 100 %] of the capped doubling, whatever the jitter', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (failures, random) => {
        const base = Math.min(retry.maxMs, retry.initialMs * 2 ** (failures - 1));
        const d = backoffDelay(failures - 1, retry, () => random);
        expect(d).toBeGreaterThanOrEqual(Math.floor(base * 0.8));
        expect(d).toBeLessThanOrEqual(base);
      }),
    );
  });
});

describe('backoffDelay without jitter (API writers, informer restarts)', () => {
  it('doubles by default and ignores the random source', () => {
    const policy: BackoffPolicy = { initialMs: 500, maxMs: 30_000 };
    const never = (): number => {
      throw new Error('random must not be drawn without jitter');
    };
    expect([0, 1, 2, 5, 6, 20].map((n) => backoffDelay(n, policy, never))).toEqual([500, 1000, 2000, 16_000, 30_000, 30_000]);
  });

  it('uses the given factor, and treats a negative retry as the first', () => {
    const policy: BackoffPolicy = { initialMs: 100, maxMs: 10_000, factor: 3 };
    expect([-1, 0, 1, 2].map((n) => backoffDelay(n, policy, () => 0.5))).toEqual([100, 100, 300, 900]);
  });
});
