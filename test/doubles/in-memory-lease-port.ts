import { LeaseConflictError, type LeasePort, type LeaseRecord, type LeaseSpecRecord } from '../../coordinator/leader/lease-port.ts';

/**
 * A Lease kept in memory with the API server's concurrency rules (resourceVersion checked on
 * replace, create fails when present). Several ports may share one store, like replicas
 * sharing one API server.
 */
export class InMemoryLeaseStore {
  record: LeaseRecord | undefined;
  private version = 0;

  port(): LeasePort {
    return {
      read: () => Promise.resolve(this.record),
      create: (spec) => this.create(spec),
      replace: (spec, expected) => this.replace(spec, expected),
    };
  }

  private create(spec: LeaseSpecRecord): Promise<LeaseRecord> {
    if (this.record !== undefined) return Promise.reject(new LeaseConflictError('lease already exists'));
    return Promise.resolve(this.store(spec));
  }

  private replace(spec: LeaseSpecRecord, expectedResourceVersion: string): Promise<LeaseRecord> {
    if (this.record?.resourceVersion !== expectedResourceVersion) {
      return Promise.reject(new LeaseConflictError('lease changed', { expectedResourceVersion }));
    }
    return Promise.resolve(this.store(spec));
  }

  private store(spec: LeaseSpecRecord): LeaseRecord {
    this.version += 1;
    this.record = { ...spec, resourceVersion: String(this.version) };
    return this.record;
  }
}
