import { abortableSleep, abortReason } from '../shared/abortable-sleep.ts';

/** Time as a port, so waiting logic runs on a manual clock in tests. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`; rejects with `signal.reason` as soon as `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    if ((await abortableSleep(ms, signal)) === 'aborted') throw abortReason(signal);
  },
};
