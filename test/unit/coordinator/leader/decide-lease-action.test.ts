import { describe, expect, it } from 'vitest';
import { decideLeaseAction, releasedLeaseSpec } from '../../../../coordinator/leader/decide-lease-action.ts';
import type { LeaseRecord } from '../../../../coordinator/leader/lease-port.ts';

const aLease = (overrides: Partial<LeaseRecord> = {}): LeaseRecord => ({
  holderIdentity: 'other',
  leaseDurationSeconds: 15,
  acquireTimeMs: 1_000,
  renewTimeMs: 1_000,
  leaseTransitions: 3,
  resourceVersion: '7',
  ...overrides,
});

describe('decideLeaseAction', () => {
  it('creates the Lease when there is none', () => {
    const action = decideLeaseAction({ record: undefined, observedAtMs: 0 }, 'me', 15, 5_000);
    expect(action).toEqual({
      kind: 'create',
      spec: { holderIdentity: 'me', leaseDurationSeconds: 15, acquireTimeMs: 5_000, renewTimeMs: 5_000, leaseTransitions: 0 },
    });
  });

  it('renews its own Lease, keeping the acquire time and transitions', () => {
    const action = decideLeaseAction({ record: aLease({ holderIdentity: 'me' }), observedAtMs: 0 }, 'me', 15, 9_000);
    expect(action).toMatchObject({
      kind: 'write',
      expectedResourceVersion: '7',
      spec: { holderIdentity: 'me', acquireTimeMs: 1_000, renewTimeMs: 9_000, leaseTransitions: 3 },
    });
  });

  it.each([
    { name: 'just observed', observedAtMs: 10_000, nowMs: 10_000 },
    { name: 'one ms before expiry', observedAtMs: 10_000, nowMs: 24_999 },
  ])('waits while another holder renewed within the duration ($name)', ({ observedAtMs, nowMs }) => {
    // The holder's renewTime is ignored: expiry counts from when we saw the record (clock skew).
    const action = decideLeaseAction({ record: aLease({ renewTimeMs: 0 }), observedAtMs }, 'me', 15, nowMs);
    expect(action).toEqual({ kind: 'wait', holder: 'other', expiresAtMs: 25_000 });
  });

  it('takes over an expired Lease, counting a transition', () => {
    const action = decideLeaseAction({ record: aLease(), observedAtMs: 10_000 }, 'me', 15, 25_000);
    expect(action).toMatchObject({
      kind: 'write',
      expectedResourceVersion: '7',
      spec: { holderIdentity: 'me', acquireTimeMs: 25_000, renewTimeMs: 25_000, leaseTransitions: 4 },
    });
  });

  it('takes over a released Lease at once', () => {
    const released = aLease({ ...releasedLeaseSpec(aLease(), 10_000) });
    expect(released.holderIdentity).toBe('');
    expect(decideLeaseAction({ record: released, observedAtMs: 10_000 }, 'me', 15, 10_001).kind).toBe('write');
  });
});
