import { describe, expect, it, vi } from 'vitest';
import { RequestTimeoutError } from '../../../../coordinator/with-timeout.ts';
import { RolloutStatusWriter, STATUS_PATCH_TIMEOUT_MS } from '../../../../coordinator/reconcile/rollout-status-writer.ts';
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

  it('clear forgets what was written (a new term writes again)', async () => {
    const api = new InMemoryClusterWriter();
    const statuses = new RolloutStatusWriter(api);
    const next = { observedGeneration: 1 };
    await statuses.write(aRollout(), ref, undefined, next);
    statuses.clear();
    expect(await statuses.write(aRollout(), ref, undefined, next)).toBe(true);
    expect(api.calls).toHaveLength(2);
  });

  it('a patch that hangs fails with RequestTimeoutError after STATUS_PATCH_TIMEOUT_MS (fake clock)', async () => {
    vi.useFakeTimers();
    try {
      const api = new InMemoryClusterWriter();
      api.patchRolloutStatus = () => new Promise<void>(() => undefined);
      const statuses = new RolloutStatusWriter(api);
      const patched = statuses.patch(ref, { observedGeneration: 1 });
      const written = statuses.write(aRollout(), ref, undefined, { observedGeneration: 2 });
      const outcomes = Promise.allSettled([patched, written]);
      await vi.advanceTimersByTimeAsync(STATUS_PATCH_TIMEOUT_MS);
      for (const outcome of await outcomes) {
        expect(outcome.status).toBe('rejected');
        expect(outcome.status === 'rejected' ? outcome.reason : undefined).toBeInstanceOf(RequestTimeoutError);
      }
      expect(statuses.previousStatus(aRollout())).toBeUndefined(); // a failed write is not remembered
    } finally {
      vi.useRealTimers();
    }
  });
});
