import { AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { apiErrorMessage, isConflict, isNotFound, isTooManyRequests } from '../../shared/kube/api-error.ts';
import { JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { DRIVER_ROLLOUT_GROUP, DRIVER_ROLLOUT_PLURAL, DRIVER_ROLLOUT_VERSION } from '../policy/driver-rollout-spec.ts';
import type { ClusterWriter } from './cluster-writer.ts';

/** Node events live in `default`, where kubelet and `kubectl describe node` put and find them. */
const NODE_EVENT_NAMESPACE = 'default';

export interface KubeClusterWriterOptions {
  /** `reportingComponent` / `source.component` of Events. */
  readonly component: string;
  /** `reportingInstance` / `source.host`: this replica's identity. */
  readonly instance: string;
}

export function createKubeClusterWriter(kc: KubeConfig, options: KubeClusterWriterOptions): ClusterWriter {
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const apps = kc.makeApiClient(AppsV1Api);
  const goneIsDone = (error: unknown): void => {
    if (!isNotFound(error) && !isConflict(error)) throw error;
  };
  let sequence = 0;
  return {
    async patchNode(name, patch) {
      return core.patchNode({ name, body: patch }, MERGE_PATCH);
    },
    async patchNodeGuarded(name, patch) {
      return core.patchNode({ name, body: patch }, JSON_PATCH);
    },
    async readNode(name) {
      return core.readNode({ name });
    },
    async deletePod(pod) {
      try {
        await core.deleteNamespacedPod({ name: pod.name, namespace: pod.namespace, body: { preconditions: { uid: pod.uid } } });
      } catch (error) {
        goneIsDone(error);
      }
    },
    async evictPod(pod) {
      try {
        await core.createNamespacedPodEviction({
          name: pod.name,
          namespace: pod.namespace,
          body: {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name: pod.name, namespace: pod.namespace },
            deleteOptions: { preconditions: { uid: pod.uid } },
          },
        });
        return { evicted: true };
      } catch (error) {
        if (isTooManyRequests(error)) return { evicted: false, message: evictionRefusal(error) };
        goneIsDone(error);
        return { evicted: true };
      }
    },
    async emitEvent(event) {
      const now = event.at ?? new Date();
      const namespace = event.target.kind === 'Node' ? NODE_EVENT_NAMESPACE : event.target.namespace;
      sequence += 1;
      await core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name: `${event.target.name}.${now.getTime().toString(16)}${sequence.toString(16)}`, namespace },
          involvedObject: {
            kind: event.target.kind,
            name: event.target.name,
            ...(event.target.namespace === '' ? {} : { namespace: event.target.namespace }),
            ...(event.target.uid === undefined ? {} : { uid: event.target.uid }),
            ...(event.target.apiVersion === undefined ? {} : { apiVersion: event.target.apiVersion }),
          },
          type: event.type,
          reason: event.reason,
          message: event.message,
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
          source: { component: options.component, host: options.instance },
          reportingComponent: options.component,
          reportingInstance: options.instance,
        },
      });
    },
    async patchRolloutStatus(namespace, name, status) {
      await custom.patchNamespacedCustomObjectStatus(
        { group: DRIVER_ROLLOUT_GROUP, version: DRIVER_ROLLOUT_VERSION, plural: DRIVER_ROLLOUT_PLURAL, namespace, name, body: { status } },
        MERGE_PATCH,
      );
    },
    async rollbackDaemonSet(namespace, name, revisionData) {
      await apps.patchNamespacedDaemonSet({ namespace, name, body: revisionData }, STRATEGIC_MERGE_PATCH);
    },
  };
}

/**
 * The API server's reason for a 429 on eviction. For a PDB the Status carries a cause such as
 * "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"; keep it, it names
 * the PDB.
 */
function evictionRefusal(error: unknown): string {
  const message = apiErrorMessage(error);
  const body: unknown = (error as { body?: unknown }).body;
  if (typeof body !== 'string') return message;
  try {
    const parsed = JSON.parse(body) as { details?: { causes?: { message?: unknown }[] } };
    const causes = (parsed.details?.causes ?? []).map((c) => c.message).filter((m): m is string => typeof m === 'string');
    return causes.length > 0 ? `${message} (${causes.join('; ')})` : message;
  } catch {
    return message;
  }
}
