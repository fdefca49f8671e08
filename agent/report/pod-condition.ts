import type { CoreV1Api, V1PodCondition } from '@kubernetes/client-node';
import { STRATEGIC_MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { isReady, truncateMessage, type DriverState } from './driver-state.ts';

/** The readiness-gate condition for `state`, as the pod's status should carry it. */
export interface DriverCondition {
  readonly type: string;
  readonly status: 'True' | 'False';
  readonly reason: string;
  readonly message: string;
  /** RFC 3339, seconds precision; moves only when `status` changes, as Kubernetes expects. */
  readonly lastTransitionTime: string;
}

/**
 * Pure: the condition for `state`, given the one the pod carries now (if any). `lastTransitionTime`
 * is kept when the status does not change, so "Ready since" stays meaningful across message
 * updates (Building → Loading are both False).
 */
export function driverCondition(
  type: string,
  state: DriverState,
  previous: Pick<V1PodCondition, 'status' | 'lastTransitionTime'> | undefined,
  now: Date,
): DriverCondition {
  const status = isReady(state) ? 'True' : 'False';
  const kept = previous?.status === status ? previous.lastTransitionTime : undefined;
  return {
    type,
    status,
    reason: state.reason,
    message: truncateMessage(state.message),
    lastTransitionTime: kept === undefined ? rfc3339(now) : rfc3339(new Date(kept)),
  };
}

export function rfc3339(date: Date): string {
  return new Date(Math.floor(date.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export interface PodRef {
  readonly name: string;
  readonly namespace: string;
}

/**
 * Writes the condition on the agent's own pod. A strategic merge patch on `status.conditions`
 * merges by `type`, so the kubelet's own conditions (and a concurrent kubelet status update) are
 * left alone; no read-modify-write is needed. The first write reads the pod once to keep a
 * `lastTransitionTime` a previous agent run set.
 */
export function createPodConditionWriter(core: CoreV1Api, pod: PodRef, conditionType: string, now: () => Date) {
  let last: Pick<V1PodCondition, 'status' | 'lastTransitionTime'> | undefined;
  let readOnce = false;
  return async (state: DriverState): Promise<void> => {
    if (!readOnce) {
      const current = await core.readNamespacedPodStatus({ name: pod.name, namespace: pod.namespace });
      last = current.status?.conditions?.find((c) => c.type === conditionType);
      readOnce = true;
    }
    const condition = driverCondition(conditionType, state, last, now());
    await core.patchNamespacedPodStatus(
      { name: pod.name, namespace: pod.namespace, body: { status: { conditions: [condition] } } },
      STRATEGIC_MERGE_PATCH,
    );
    last = { status: condition.status, lastTransitionTime: new Date(condition.lastTransitionTime) };
  };
}
