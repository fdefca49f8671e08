import type { V1Container, V1ContainerStatus, V1Node, V1NodeCondition, V1Pod, V1PodCondition } from '@kubernetes/client-node';

/**
 * Drops, in place, what the coordinator never reads from a cached object, so informers over
 * thousands of nodes and tens of thousands of pods stay small. In place because client-node's
 * ListWatch keeps the very same object in its own map: a trimmed copy would leave the full one
 * alive there. What stays is exactly what build-snapshot.ts and the reconciler read; a unit test
 * checks that a snapshot of trimmed objects equals one of the originals.
 *
 * Everywhere: managedFields (often the largest part of an object), by giving the object a copy of
 * its metadata without them: V8 turns an object it `delete`s a property from into a slower,
 * larger dictionary-mode object, which cost a fifth of the heap the pod and node caches take
 * (bench/suites/memory.ts). Pods: containers reduced to
 * name and resources, volumes to name and emptyDir, node selector and required node affinity
 * kept; status reduced to phase, conditions (type, status, reason, message: the agent's failure
 * is in its condition), and per container (init containers too) restart count, readiness and the
 * waiting reason. Nodes: status reduced to conditions, type and status (Ready's reason, message
 * and lastTransitionTime too; images, addresses, capacity, nodeInfo go).
 */
export function trimPod(pod: V1Pod): void {
  if (pod.metadata !== undefined) pod.metadata = withoutManagedFields(pod.metadata);
  const spec = pod.spec;
  if (spec !== undefined) {
    const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
    pod.spec = {
      containers: spec.containers.map(trimContainer),
      ...(spec.initContainers === undefined ? {} : { initContainers: spec.initContainers.map(trimContainer) }),
      ...(spec.nodeName === undefined ? {} : { nodeName: spec.nodeName }),
      ...(spec.volumes === undefined ? {} : { volumes: spec.volumes.map((v) => (v.emptyDir === undefined ? { name: v.name } : { name: v.name, emptyDir: v.emptyDir })) }),
      // The node label keys an operand requires (operand pausing): nodeSelector and required node affinity.
      ...(spec.nodeSelector === undefined ? {} : { nodeSelector: spec.nodeSelector }),
      ...(required === undefined ? {} : { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: required } } }),
    };
  }
  const status = pod.status;
  if (status !== undefined) {
    pod.status = {
      ...(status.phase === undefined ? {} : { phase: status.phase }),
      // reason and message too: the agent's readiness-gate condition carries its failure in them.
      ...(status.conditions === undefined ? {} : { conditions: status.conditions.map(trimCondition) }),
      ...(status.initContainerStatuses === undefined ? {} : { initContainerStatuses: status.initContainerStatuses.map(trimContainerStatus) }),
      ...(status.containerStatuses === undefined ? {} : { containerStatuses: status.containerStatuses.map(trimContainerStatus) }),
    };
  }
}

export function trimNode(node: V1Node): void {
  if (node.metadata !== undefined) node.metadata = withoutManagedFields(node.metadata);
  const status = node.status;
  if (status !== undefined) {
    node.status = status.conditions === undefined ? {} : { conditions: status.conditions.map(trimNodeCondition) };
  }
}

/** For kinds whose objects are few (DaemonSets, revisions, PDBs, DriverRollouts): managedFields only. */
export function trimManagedFields(object: { metadata?: { managedFields?: unknown } }): void {
  if (object.metadata !== undefined) object.metadata = withoutManagedFields(object.metadata);
}

/** The metadata itself when it has no managedFields (trimming again changes nothing), else a copy without them. */
function withoutManagedFields<M extends { managedFields?: unknown }>(metadata: M): M {
  if (!Object.hasOwn(metadata, 'managedFields')) return metadata;
  const { managedFields: _dropped, ...rest } = metadata;
  return rest as M;
}

/**
 * Type and status; for Ready also why and since when (a NotReady node's hold names them). Not
 * lastHeartbeatTime, which changes on every kubelet report.
 */
function trimNodeCondition(c: V1NodeCondition): V1NodeCondition {
  if (c.type !== 'Ready') return { type: c.type, status: c.status };
  return {
    type: c.type,
    status: c.status,
    ...(c.reason === undefined ? {} : { reason: c.reason }),
    ...(c.message === undefined ? {} : { message: c.message }),
    ...(c.lastTransitionTime === undefined ? {} : { lastTransitionTime: c.lastTransitionTime }),
  };
}

function trimCondition(c: V1PodCondition): V1PodCondition {
  return { type: c.type, status: c.status, ...(c.reason === undefined ? {} : { reason: c.reason }), ...(c.message === undefined ? {} : { message: c.message }) };
}

/** Restart counts (init containers' count too) and why a container waits (CrashLoopBackOff, ImagePullBackOff...). */
function trimContainerStatus(c: V1ContainerStatus): V1ContainerStatus {
  const waiting = c.state?.waiting;
  return {
    name: c.name,
    image: '',
    imageID: '',
    ready: c.ready,
    restartCount: c.restartCount,
    ...(waiting === undefined ? {} : { state: { waiting: { ...(waiting.reason === undefined ? {} : { reason: waiting.reason }), ...(waiting.message === undefined ? {} : { message: waiting.message }) } } }),
  };
}

function trimContainer(c: V1Container): V1Container {
  return c.resources === undefined ? { name: c.name } : { name: c.name, resources: c.resources };
}
