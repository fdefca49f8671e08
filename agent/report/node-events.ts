import type { CoreV1Api, CoreV1Event } from '@kubernetes/client-node';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { isNotFound } from '../../shared/kube/api-error.ts';
import { truncateMessage } from './driver-state.ts';

export interface NodeEventInput {
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

export interface NodeEventTarget {
  readonly nodeName: string;
  /** Events are namespaced; the agent writes them in its own namespace (kubectl describe node lists all namespaces). */
  readonly namespace: string;
  /** The pod writing them, shown as the reporting instance. */
  readonly podName: string;
}

export const AGENT_COMPONENT = 'driver-rollout-agent';

/** Pure: a new Event about the node. `involvedObject` has no uid: kubectl matches node events by kind and name. */
export function nodeEvent(target: NodeEventTarget, input: NodeEventInput, now: Date): CoreV1Event {
  return {
    metadata: { generateName: `${target.nodeName}.`, namespace: target.namespace },
    involvedObject: { apiVersion: 'v1', kind: 'Node', name: target.nodeName },
    type: input.type,
    reason: input.reason,
    message: truncateMessage(input.message),
    source: { component: AGENT_COMPONENT, host: target.nodeName },
    reportingComponent: AGENT_COMPONENT,
    reportingInstance: target.podName,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}

/**
 * Records Events on the node. A retry that fails the same way again does not create a new Event:
 * it bumps `count` and `lastTimestamp` of the one already written, as the kubelet's recorder does.
 */
export function createNodeEventRecorder(core: CoreV1Api, target: NodeEventTarget, now: () => Date) {
  const written = new Map<string, { name: string; count: number }>();
  return async (input: NodeEventInput): Promise<void> => {
    const key = `${input.type}\u0000${input.reason}\u0000${input.message}`;
    const seen = written.get(key);
    if (seen !== undefined) {
      try {
        const count = seen.count + 1;
        await core.patchNamespacedEvent(
          { name: seen.name, namespace: target.namespace, body: { count, lastTimestamp: now() } },
          MERGE_PATCH,
        );
        seen.count = count;
        return;
      } catch (error) {
        // Events expire (kube-apiserver --event-ttl, 1 h by default): write a new one.
        if (!isNotFound(error)) throw error;
        written.delete(key);
      }
    }
    const created = await core.createNamespacedEvent({ namespace: target.namespace, body: nodeEvent(target, input, now()) });
    written.set(key, { name: created.metadata.name ?? '', count: 1 });
  };
}
