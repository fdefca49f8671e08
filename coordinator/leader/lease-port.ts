import { DriverRolloutError } from '../../shared/errors.ts';

/** What a Lease says, in milliseconds since the epoch; `resourceVersion` guards every write. */
export interface LeaseRecord {
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number;
  readonly acquireTimeMs: number;
  readonly renewTimeMs: number;
  readonly leaseTransitions: number;
  readonly resourceVersion: string;
}

export type LeaseSpecRecord = Omit<LeaseRecord, 'resourceVersion'>;

/** Another writer changed the Lease since we read it (HTTP 409), or created it first. */
export class LeaseConflictError extends DriverRolloutError {}

/**
 * The Lease object, nothing more. `replace` must fail with LeaseConflictError when the
 * stored resourceVersion differs from `expectedResourceVersion` (optimistic concurrency),
 * and `create` when the Lease already exists: that is what makes the election safe.
 */
export interface LeasePort {
  read(): Promise<LeaseRecord | undefined>;
  create(spec: LeaseSpecRecord): Promise<LeaseRecord>;
  replace(spec: LeaseSpecRecord, expectedResourceVersion: string): Promise<LeaseRecord>;
}
