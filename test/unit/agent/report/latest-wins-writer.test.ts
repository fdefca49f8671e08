import { describe, expect, it } from 'vitest';
import { createLatestWinsWriter } from '../../../../agent/report/latest-wins-writer.ts';

/** A write target whose calls are released by the test, to control interleavings. */
function aGatedTarget() {
  const written: number[] = [];
  const gates: { value: number; release: (ok: boolean) => void }[] = [];
  const write = (value: number) =>
    new Promise<void>((resolve, reject) => {
      gates.push({
        value,
        release: (ok) => {
          if (ok) {
            written.push(value);
            resolve();
          } else reject(new Error(`write ${value} failed`));
        },
      });
    });
  const next = async () => {
    for (;;) {
      const gate = gates.shift();
      if (gate !== undefined) return gate;
      await new Promise((r) => setTimeout(r, 1));
    }
  };
  return { written, write, next };
}

describe('createLatestWinsWriter', () => {
  it('while a write is in flight, only the newest of the values set meanwhile is written next', async () => {
    const t = aGatedTarget();
    const w = createLatestWinsWriter(t.write, { retryDelayMs: () => 1, onError: () => undefined });
    w.set(1);
    const first = await t.next();
    w.set(2);
    w.set(3);
    first.release(true);
    const second = await t.next();
    expect(second.value).toBe(3);
    second.release(true);
    expect(await w.flush(1000)).toBe(true);
    expect(t.written).toEqual([1, 3]);
  });

  it('a failed write is retried until it succeeds, and errors are reported with the attempt number', async () => {
    const t = aGatedTarget();
    const errors: number[] = [];
    const w = createLatestWinsWriter(t.write, { retryDelayMs: () => 1, onError: (_e, attempt) => errors.push(attempt) });
    w.set(7);
    (await t.next()).release(false);
    (await t.next()).release(false);
    (await t.next()).release(true);
    expect(await w.flush(1000)).toBe(true);
    expect(t.written).toEqual([7]);
    expect(errors).toEqual([1, 2]);
  });

  it('a value set during a retry delay is written at once, not after the delay', async () => {
    const t = aGatedTarget();
    const w = createLatestWinsWriter(t.write, { retryDelayMs: () => 60_000, onError: () => undefined });
    w.set(1);
    (await t.next()).release(false);
    // The retry delay is a minute, longer than the test's timeout: reaching the next write at all
    // shows the delay was cut short.
    w.set(2);
    const next = await t.next();
    expect(next.value).toBe(2);
    next.release(true);
    expect(await w.flush(1000)).toBe(true);
    w.stop();
  });

  it('flush reports false when the writes cannot finish in time', async () => {
    const t = aGatedTarget();
    const w = createLatestWinsWriter(t.write, { retryDelayMs: () => 1, onError: () => undefined });
    w.set(1);
    await t.next();
    expect(await w.flush(20)).toBe(false);
    w.stop();
  });
});
