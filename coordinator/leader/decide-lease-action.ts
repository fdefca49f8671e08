import type { LeaseRecord, LeaseSpecRecord } from './lease-port.ts';

/**
 * What a candidate does with the Lease it just read.
 *
 * Expiry is judged by when *we* first saw the current record (`observedAtMs`, our clock), not
 * by its renewTime (the holder's clock), as client-go does: clocks of two replicas may differ,
 * but an unchanged record for a whole lease duration means the holder stopped renewing.
 */
export type LeaseAction =
  | { readonly kind: 'create'; readonly spec: LeaseSpecRecord }
  | { readonly kind: 'write'; readonly spec: LeaseSpecRecord; readonly expectedResourceVersion: string }
  | { readonly kind: 'wait'; readonly holder: string; readonly expiresAtMs: number };

export interface LeaseObservation {
  readonly record: LeaseRecord | undefined;
  /** Our clock when this record (by resourceVersion) was first seen. */
  readonly observedAtMs: number;
}

export function decideLeaseAction(
  observation: LeaseObservation,
  identity: string,
  leaseDurationSeconds: number,
  nowMs: number,
): LeaseAction {
  const { record } = observation;
  if (record === undefined) {
    return {
      kind: 'create',
      spec: { holderIdentity: identity, leaseDurationSeconds, acquireTimeMs: nowMs, renewTimeMs: nowMs, leaseTransitions: 0 },
    };
  }
  if (record.holderIdentity === identity) {
    return {
      kind: 'write',
      spec: { ...record, leaseDurationSeconds, renewTimeMs: nowMs },
      expectedResourceVersion: record.resourceVersion,
    };
  }
  const expiresAtMs = observation.observedAtMs + record.leaseDurationSeconds * 1000;
  if (record.holderIdentity !== '' && nowMs < expiresAtMs) {
    return { kind: 'wait', holder: record.holderIdentity, expiresAtMs };
  }
  return {
    kind: 'write',
    spec: {
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTimeMs: nowMs,
      renewTimeMs: nowMs,
      leaseTransitions: record.leaseTransitions + 1,
    },
    expectedResourceVersion: record.resourceVersion,
  };
}

/**
 * The record a leader writes when it steps down gracefully: no holder and a one-second
 * duration (client-go does the same), so a standby takes over at its next try.
 */
export function releasedLeaseSpec(record: LeaseRecord, nowMs: number): LeaseSpecRecord {
  return { ...record, holderIdentity: '', leaseDurationSeconds: 1, renewTimeMs: nowMs };
}
