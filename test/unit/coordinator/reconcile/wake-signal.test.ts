import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WakeSignal } from '../../../../coordinator/reconcile/wake-signal.ts';

// Fake timers: every time below is the fake clock's, exact whatever the machine's load.
const signals: WakeSignal[] = [];
const aSignal = (debounceMs: number): WakeSignal => {
  const s = new WakeSignal(debounceMs);
  signals.push(s);
  return s;
};
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  for (const s of signals.splice(0)) s.dispose();
  vi.useRealTimers();
});

/** The fake times at which a loop waiting on `wake` wakes up during `ms` of fake time. */
async function wakeUpTimes(wake: WakeSignal, ms: number, during: () => void): Promise<number[]> {
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
  await vi.advanceTimersByTimeAsync(ms);
  stop.abort();
  await loop;
  return times;
}

describe('WakeSignal', () => {
  it('coalesces a burst of triggers into one wake-up after the debounce', async () => {
    const wake = aSignal(20);
    const times = await wakeUpTimes(wake, 150, () => {
      for (let i = 0; i < 50; i++) wake.trigger();
    });
    expect(times).toEqual([20]);
  });

  it('coalesces triggers over at least the last pass’s duration, so passes take at most about half the time', async () => {
    const wake = aSignal(20);
    wake.pace(70);
    const times = await wakeUpTimes(wake, 150, () => {
      wake.trigger();
    });
    expect(times).toEqual([70]);
    wake.pace(5); // a cheap pass: the debounce again
    const again = await wakeUpTimes(wake, 100, () => {
      wake.trigger();
    });
    expect(again).toEqual([20]);
  });

  it('remembers a trigger that fired while nobody waited (a pass was running)', async () => {
    const wake = aSignal(5);
    wake.trigger();
    await vi.advanceTimersByTimeAsync(30);
    let woke = false;
    void wake.wait(new AbortController().signal).then(() => {
      woke = true;
    });
    // No timer runs: only the pending promise jobs.
    await vi.advanceTimersByTimeAsync(0);
    expect(woke).toBe(true);
  });

  it('wakes at the earliest armed deadline, not at later ones', async () => {
    const wake = aSignal(5);
    const times = await wakeUpTimes(wake, 250, () => {
      const now = Date.now();
      wake.wakeAt(now + 200, now);
      wake.wakeAt(now + 60, now);
      wake.wakeAt(now + 120, now);
    });
    expect(times).toEqual([60]);
  });

  it('does not wake at once for a deadline beyond Node’s longest timer (a 30-day DriverRollout timeout)', async () => {
    // Real timers: Node, unlike the fake clock, fires a timer of more than 2^31-1 ms after 1 ms.
    vi.useRealTimers();
    const wake = aSignal(5);
    const now = Date.now();
    wake.wakeAt(now + 30 * 24 * 3600 * 1000, now);
    let woke = false;
    const stop = new AbortController();
    const waiting = wake.wait(stop.signal).then(() => {
      woke = !stop.signal.aborted;
    });
    // Armed after the deadline's timer: an overflowing one (1 ms) would have run by then.
    await new Promise((resolve) => setTimeout(resolve, 50));
    stop.abort();
    await waiting;
    expect(woke).toBe(false);
  });

  it('returns at once when the signal aborts', async () => {
    const wake = aSignal(5);
    const stop = new AbortController();
    const waiting = wake.wait(stop.signal);
    stop.abort();
    await expect(waiting).resolves.toBeUndefined();
  });
});
