import { afterEach, describe, expect, it } from 'vitest';
import { delay } from '../../../../coordinator/delay.ts';
import { WakeSignal } from '../../../../coordinator/reconcile/wake-signal.ts';

const signals: WakeSignal[] = [];
const aSignal = (debounceMs: number): WakeSignal => {
  const s = new WakeSignal(debounceMs);
  signals.push(s);
  return s;
};
afterEach(() => {
  for (const s of signals.splice(0)) s.dispose();
});

/** Counts wake-ups of a loop that waits on `wake` for `ms`. */
async function countWakeUps(wake: WakeSignal, ms: number, during: () => void): Promise<number[]> {
  const stop = new AbortController();
  const times: number[] = [];
  const start = Date.now();
  const loop = (async () => {
    for (;;) {
      await wake.wait(stop.signal);
      if (stop.signal.aborted) return;
      times.push(Date.now() - start);
    }
  })();
  during();
  await delay(ms);
  stop.abort();
  await loop;
  return times;
}

describe('WakeSignal', () => {
  it('coalesces a burst of triggers into one wake-up after the debounce', async () => {
    const wake = aSignal(20);
    const times = await countWakeUps(wake, 150, () => {
      for (let i = 0; i < 50; i++) wake.trigger();
    });
    expect(times).toHaveLength(1);
    expect(times[0]).toBeGreaterThanOrEqual(15);
    expect(times[0]).toBeLessThan(100);
  });

  it('remembers a trigger that fired while nobody waited (a pass was running)', async () => {
    const wake = aSignal(5);
    wake.trigger();
    await delay(30);
    const stop = new AbortController();
    const started = Date.now();
    await wake.wait(stop.signal);
    expect(Date.now() - started).toBeLessThan(10);
  });

  it('wakes at the earliest armed deadline, not at later ones', async () => {
    const wake = aSignal(5);
    const times = await countWakeUps(wake, 250, () => {
      const now = Date.now();
      wake.wakeAt(now + 200, now);
      wake.wakeAt(now + 60, now);
      wake.wakeAt(now + 120, now);
    });
    expect(times).toHaveLength(1);
    expect(times[0]).toBeGreaterThanOrEqual(55);
    expect(times[0]).toBeLessThan(120);
  });

  it('returns at once when the signal aborts', async () => {
    const wake = aSignal(5);
    const stop = new AbortController();
    const waiting = wake.wait(stop.signal);
    stop.abort();
    await expect(waiting).resolves.toBeUndefined();
  });
});
