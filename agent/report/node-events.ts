import type { CoreV1Api, CoreV1Event } from '@kubernetes/client-node';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { isNotFound } from '../../shared/kube/api-error.ts';
import { truncateMessage } from './driver-state.ts';

export interface NodeEventInput {
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
  /** What makes two Events the same one (a repeat bumps its count); default: type and reason. */
  readonly key?: string;
}

/**
 * Reasons of the node Events the agent writes besides a failure's (describe-failure.ts, a Warning
 * per failed step): the driver loaded, and the next-kernel preflight's verdict per kernel. Each
 * has an entry in docs/runbook.md (test/unit/docs/runbook.test.ts).
 */
export const DRIVER_LOADED_EVENT = 'DriverLoaded';
export const NEXT_KERNEL_BUILD_FAILED_EVENT = 'NextKernelBuildFailed';
export const NEXT_KERNEL_READY_EVENT = 'NextKernelReady';
/** Warning: the driver builds for an installed, not running kernel, and that kernel would refuse its modules' signatures. */
export const NEXT_KERNEL_MODULES_REFUSED_EVENT = 'NextKernelModulesRefused';

/**
 * Events about a cluster-scoped object must live in `default`: the API server rejects a core/v1
 * Event whose namespace is neither empty nor `default` when its involvedObject has no namespace
 * ("involvedObject.namespace: does not match event.namespace"). The kubelet writes node events there too.
 */
export const NODE_EVENT_NAMESPACE = 'default';

export interface NodeEventTarget {
  readonly nodeName: string;
  /** The pod writing them, shown as the reporting instance. */
  readonly podName: string;
}

export const AGENT_COMPONENT = 'driver-rollout-agent';

/** Pure: a new Event about the node. `involvedObject` has no uid: kubectl matches node events by kind and name. */
export function nodeEvent(target: NodeEventTarget, input: NodeEventInput, now: Date): CoreV1Event {
  return {
    metadata: { generateName: `${target.nodeName}.`, namespace: NODE_EVENT_NAMESPACE },
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
 * Records Events on the node. A retry that fails for the same reason again does not create a new
 * Event: it bumps `count` and `lastTimestamp` of the one already written and takes the newest
 * message (a compiler's output names a fresh temporary directory every time), as the kubelet's
 * recorder aggregates similar events.
 */
export function createNodeEventRecorder(core: CoreV1Api, target: NodeEventTarget, now: () => Date) {
  const written = new Map<string, { name: string; count: number }>();
  // One write at a time: two failures reported while the first create is still in flight (a slow
  // API server) would otherwise both find nothing written and create two Events.
  let queue: Promise<unknown> = Promise.resolve();
  return (input: NodeEventInput): Promise<void> => {
    const next = queue.then(() => record(input));
    queue = next.catch(() => undefined);
    return next;
  };
  async function record(input: NodeEventInput): Promise<void> {
    const key = input.key ?? `${input.type}\u0000${input.reason}`;
    const seen = written.get(key);
    if (seen !== undefined) {
      try {
        const count = seen.count + 1;
        await core.patchNamespacedEvent(
          { name: seen.name, namespace: NODE_EVENT_NAMESPACE, body: { count, lastTimestamp: now(), message: truncateMessage(input.message) } },
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
    const created = await core.createNamespacedEvent({ namespace: NODE_EVENT_NAMESPACE, body: nodeEvent(target, input, now()) });
    written.set(key, { name: created.metadata.name ?? '', count: 1 });
  }
}
