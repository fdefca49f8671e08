import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { isConflict, isNotFound } from '../../shared/kube/api-error.ts';
import { LeaseConflictError, type LeasePort, type LeaseRecord, type LeaseSpecRecord } from './lease-port.ts';

/**
 * A coordination.k8s.io/v1 Lease. client-node has no leader-election helper: writes use
 * `replace` with the read resourceVersion, so a 409 means someone else wrote first.
 * MicroTime fields come back as strings (the generated deserializer does not know
 * V1MicroTime), so both forms are accepted.
 */
export function createKubeLeasePort(kc: KubeConfig, namespace: string, name: string): LeasePort {
  const api = kc.makeApiClient(CoordinationV1Api);
  const toBody = (spec: LeaseSpecRecord, resourceVersion?: string): V1Lease => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: resourceVersion === undefined ? { name, namespace } : { name, namespace, resourceVersion },
    spec: {
      holderIdentity: spec.holderIdentity,
      leaseDurationSeconds: spec.leaseDurationSeconds,
      acquireTime: new V1MicroTime(spec.acquireTimeMs),
      renewTime: new V1MicroTime(spec.renewTimeMs),
      leaseTransitions: spec.leaseTransitions,
    },
  });
  return {
    async read() {
      try {
        return toRecord(await api.readNamespacedLease({ name, namespace }));
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async create(spec) {
      try {
        return toRecord(await api.createNamespacedLease({ namespace, body: toBody(spec) }));
      } catch (error) {
        if (isConflict(error)) throw new LeaseConflictError('lease already exists', { namespace, name }, { cause: error });
        throw error;
      }
    },
    async replace(spec, expectedResourceVersion) {
      try {
        return toRecord(
          await api.replaceNamespacedLease({ name, namespace, body: toBody(spec, expectedResourceVersion) }),
        );
      } catch (error) {
        if (isConflict(error)) throw new LeaseConflictError('lease changed', { namespace, name }, { cause: error });
        throw error;
      }
    },
  };
}

function toMs(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'string') return Date.parse(value);
  return 0;
}

function toRecord(lease: V1Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  return {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTimeMs: toMs(spec.acquireTime),
    renewTimeMs: toMs(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}
