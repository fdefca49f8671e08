import { describe, expect, it, vi } from 'vitest';
import { RequestTimeoutError } from '../../../../coordinator/with-timeout.ts';
import { RolloutStatusWriter, STATUS_MIN_INTERVAL_MS, STATUS_PATCH_TIMEOUT_MS } from '../../../../coordinator/reconcile/rollout-status-writer.ts';
import type { DriverRolloutObject } from '../../../../coordinator/status/driver-rollout-object.ts';
import { InMemoryClusterWriter } from '../../../doubles/in-memory-cluster-writer.ts';

const ref = { namespace: 'ns', name: 'gpu', generation: 1 };

function aRollout(status?: unknown): DriverRolloutObject {
  return { kind: 'DriverRollout', metadata: { name: 'gpu', namespace: 'ns', uid: 'u1', generation: 1 }, status };
}

describe('RolloutStatusWriter', () => {
  it('writes a changed status once, and not again while the stored one lags (pruned or not yet seen)', async () => {
    const api = new InMemoryClusterWriter();
    const statuses = new RolloutStatusWriter(api);
    const next = { observedGeneration: 1, conditions: [{ type: 'Valid', status: 'False' }] };
    expect(await statuses.write(aRollout(), ref, undefined, next)).toBe(true);
    expect(await statuses.write(aRollout(), ref, undefined, next)).toBe(false);
    expect(api.calls).toEqual(['patchRolloutStatus ns/gpu']);
  });

  it('does not write what is already stored', async () => {
    const api = new InMemoryClusterWriter();
    const stored = { observedGeneration: 1, conditions: [] };
    expect(await new RolloutStatusWriter(api).write(aRollout(stored), ref, stored, { ...stored })).toBe(false);
    expect(api.calls).toEqual([]);
  });

  it('previousStatus: the stored status when it has conditions, else what was last written', async () => {
    const statuses = new RolloutStatusWriter(new InMemoryClusterWriter());
    const stored = { conditions: [{ type: 'Halted', status: 'False' }] };
    expect(statuses.previousStatus(aRollout(stored))).toBe(stored);
    expect(statuses.previousStatus(aRollout())).toBeUndefined();
    const written = { observedGeneration: 1, conditions: [] };
    await statuses.write(aRollout(), ref, undefined, written);
    expect(statuses.previousStatus(aRollout({ observedGeneration: 1 }))).toBe(written);
  });

  it('isOwnEcho: the rollout at the generation of the status last written, with that status, not being deleted', async () => {
    const statuses = new RolloutStatusWriter(new InMemoryClusterWriter());
    const written = { observedGeneration: 1, conditions: [{ type: 'Halted', status: 'False' }] };
    expect(statuses.isOwnEcho(aRollout(written))).toBe(false); // nothing written yet
    await statuses.write(aRollout(), ref, undefined, written);
    expect(statuses.isOwnEcho(aRollout(structuredClone(written)))).toBe(true);
    expect(statuses.isOwnEcho({ ...aRollout(written), metadata: { name: 'gpu', namespace: 'ns', uid: 'u1', generation: 2 } })).toBe(false); // a spec change
    expect(statuses.isOwnEcho(aRollout({ observedGeneration: 1, conditions: [] }))).toBe(false); // another status
    expect(statuses.isOwnEcho({ ...aRollout(written), metadata: { name: 'gpu', namespace: 'ns', uid: 'u1', generation: 1, deletionTimestamp: new Date() } })).toBe(false);
  });

  it('clear forgets what was written (a new term writes again)', async () => {
    const api = new InMemoryClusterWriter();
    const statuses = new RolloutStatusWriter(api);
    const next = { observedGeneration: 1 };
    await statuses.write(aRollout(), ref, undefined, next);
    statuses.clear();
    expect(await statuses.write(aRollout(), ref, undefined, next)).toBe(true);
    expect(api.calls).toHaveLength(2);
  });

  it('a write that hangs fails with RequestTimeoutError after STATUS_PATCH_TIMEOUT_MS (fake clock)', async () => {
    vi.useFakeTimers();
    try {
      const api = new InMemoryClusterWriter();
      api.patchRolloutStatus = () => new Promise<void>(() => undefined);
      const statuses = new RolloutStatusWriter(api);
      const failures: Error[] = [];
      statuses.submit(aRollout(), ref, { observedGeneration: 1 }, { signal: new AbortController().signal, onFailed: (e) => failures.push(e) });
      const written = statuses.write(aRollout(), ref, undefined, { observedGeneration: 2 });
      const outcome = Promise.allSettled([written]);
      await vi.advanceTimersByTimeAsync(STATUS_PATCH_TIMEOUT_MS);
      const [settled] = await outcome;
      expect(settled.status === 'rejected' ? settled.reason : undefined).toBeInstanceOf(RequestTimeoutError);
      expect(failures.map((e) => e.constructor)).toEqual([RequestTimeoutError]);
      expect(statuses.previousStatus(aRollout())).toBeUndefined(); // a failed write is not remembered
    } finally {
      vi.useRealTimers();
    }
  });

  describe('submit: beside the passes, one write per rollout at a time, the latest last', () => {
    /** An API whose status patches wait until released, one by one. */
    function aSlowApi() {
      const api = new InMemoryClusterWriter();
      const answers: (() => void)[] = [];
      const patch = api.patchRolloutStatus.bind(api);
      api.patchRolloutStatus = (namespace, name, status) =>
        new Promise<void>((resolve, reject) => {
          answers.push(() => {
            patch(namespace, name, status).then(resolve, reject);
          });
        });
      const answerNext = async (): Promise<void> => {
        answers.shift()?.();
        await new Promise((r) => setImmediate(r));
      };
      return { api, answerNext, pending: () => answers.length };
    }
    const NO_INTERVAL = { minIntervalMs: 0 };
    const options = (extra: { signal?: AbortSignal; afterWritten?: () => void; failures?: Error[] } = {}) => ({
      signal: extra.signal ?? new AbortController().signal,
      ...(extra.afterWritten === undefined ? {} : { afterWritten: extra.afterWritten }),
      onFailed: (e: Error) => extra.failures?.push(e),
    });

    it('statuses submitted while one is being written: only the latest follows it, and what was to follow each runs once it is stored', async () => {
      const { api, answerNext, pending } = aSlowApi();
      const statuses = new RolloutStatusWriter(api, NO_INTERVAL);
      const after: string[] = [];
      for (const g of [1, 2, 3]) statuses.submit(aRollout(), ref, { observedGeneration: g }, options({ afterWritten: () => after.push(`after ${g}`) }));
      expect(pending()).toBe(1); // one write at a time
      expect(statuses.previousStatus(aRollout())).toEqual({ observedGeneration: 3 }); // the newest, not yet written
      await answerNext();
      expect(after).toEqual(['after 1']);
      await answerNext();
      expect(after).toEqual(['after 1', 'after 2', 'after 3']);
      await statuses.idle();
      expect(api.calls).toEqual(['patchRolloutStatus ns/gpu', 'patchRolloutStatus ns/gpu']);
      expect(api.statuses.get('ns/gpu')).toEqual({ observedGeneration: 3 });
    });

    it('a failed write is reported and forgotten; what was to follow it follows the status waiting behind it', async () => {
      const api = new InMemoryClusterWriter();
      const statuses = new RolloutStatusWriter(api, NO_INTERVAL);
      const failures: Error[] = [];
      const after: string[] = [];
      api.failNext.add('patchRolloutStatus');
      statuses.submit(aRollout(), ref, { observedGeneration: 1 }, options({ failures, afterWritten: () => after.push('after 1') }));
      statuses.submit(aRollout(), ref, { observedGeneration: 2 }, options({ failures }));
      await statuses.idle();
      expect(failures).toHaveLength(1);
      expect(after).toEqual(['after 1']);
      expect(api.statuses.get('ns/gpu')).toEqual({ observedGeneration: 2 });
    });

    it(`writes start at most once per STATUS_MIN_INTERVAL_MS; the latest status held back goes out when it ends (fake clock)`, async () => {
      vi.useFakeTimers();
      try {
        const api = new InMemoryClusterWriter();
        const statuses = new RolloutStatusWriter(api);
        statuses.submit(aRollout(), ref, { observedGeneration: 1 }, options());
        await vi.advanceTimersByTimeAsync(0);
        expect(api.calls).toHaveLength(1); // the first at once
        for (const g of [2, 3, 4]) statuses.submit(aRollout(), ref, { observedGeneration: g }, options());
        await vi.advanceTimersByTimeAsync(STATUS_MIN_INTERVAL_MS - 1);
        expect(api.calls).toHaveLength(1);
        expect(statuses.previousStatus(aRollout())).toEqual({ observedGeneration: 4 });
        await vi.advanceTimersByTimeAsync(1);
        expect(api.calls).toHaveLength(2);
        expect(api.statuses.get('ns/gpu')).toEqual({ observedGeneration: 4 });
        const idle = statuses.idle();
        statuses.submit(aRollout(), ref, { observedGeneration: 5 }, options());
        await vi.advanceTimersByTimeAsync(STATUS_MIN_INTERVAL_MS);
        await idle;
        expect(api.statuses.get('ns/gpu')).toEqual({ observedGeneration: 5 });
        expect(api.calls).toHaveLength(3);
      } finally {
        vi.useRealTimers();
      }
    });

    it('idle does not wait for a status held back by the interval once its term has ended: it never goes out (fake clock)', async () => {
      vi.useFakeTimers();
      try {
        const api = new InMemoryClusterWriter();
        const statuses = new RolloutStatusWriter(api);
        const term = new AbortController();
        statuses.submit(aRollout(), ref, { observedGeneration: 1 }, options({ signal: term.signal }));
        await vi.advanceTimersByTimeAsync(0);
        statuses.submit(aRollout(), ref, { observedGeneration: 2 }, options({ signal: term.signal }));
        term.abort();
        await statuses.idle(); // no timer advanced: it must not wait for the held one
        await vi.advanceTimersByTimeAsync(STATUS_MIN_INTERVAL_MS);
        expect(api.calls).toEqual(['patchRolloutStatus ns/gpu']);
      } finally {
        vi.useRealTimers();
      }
    });

    it('nothing goes out once leadership is lost', async () => {
      const { api, answerNext } = aSlowApi();
      const statuses = new RolloutStatusWriter(api, NO_INTERVAL);
      const term = new AbortController();
      statuses.submit(aRollout(), ref, { observedGeneration: 1 }, options({ signal: term.signal }));
      statuses.submit(aRollout(), ref, { observedGeneration: 2 }, options({ signal: term.signal }));
      term.abort();
      await answerNext();
      await statuses.idle();
      expect(api.calls).toEqual(['patchRolloutStatus ns/gpu']);
    });
  });
});
