import type { V1Container, V1Node, V1Pod } from '@kubernetes/client-node';

/**
 * Drops, in place, what the coordinator never reads from a cached object, so informers over
 * thousands of nodes and tens of thousands of pods stay small. In place because client-node's
 * ListWatch keeps the very same object in its own map: a trimmed copy would leave the full one
 * alive there. What stays is exactly what build-snapshot.ts and the reconciler read; a unit test
 * checks that a snapshot of trimmed objects equals one of the originals.
 *
 * Everywhere: managedFields (often the largest part of an object). Pods: containers reduced to
 * name and resources, volumes to name and emptyDir, status to phase, Ready-relevant conditions and
 * restart counts. Nodes: status reduced to conditions (images, addresses, capacity, nodeInfo go).
 */
export function trimPod(pod: V1Pod): void {
  const metadata = pod.metadata;
  if (metadata !== undefined) delete metadata.managedFields;
  const spec = pod.spec;
  if (spec !== undefined) {
    pod.spec = {
      containers: spec.containers.map(trimContainer),
      ...(spec.initContainers === undefined ? {} : { initContainers: spec.initContainers.map(trimContainer) }),
      ...(spec.nodeName === undefined ? {} : { nodeName: spec.nodeName }),
      ...(spec.volumes === undefined ? {} : { volumes: spec.volumes.map((v) => (v.emptyDir === undefined ? { name: v.name } : { name: v.name, emptyDir: v.emptyDir })) }),
    };
  }
  const status = pod.status;
  if (status !== undefined) {
    pod.status = {
      ...(status.phase === undefined ? {} : { phase: status.phase }),
      ...(status.conditions === undefined ? {} : { conditions: status.conditions.map((c) => ({ type: c.type, status: c.status })) }),
      ...(status.containerStatuses === undefined
        ? {}
        : { containerStatuses: status.containerStatuses.map((c) => ({ name: c.name, image: '', imageID: '', ready: c.ready, restartCount: c.restartCount })) }),
    };
  }
}

export function trimNode(node: V1Node): void {
  const metadata = node.metadata;
  if (metadata !== undefined) delete metadata.managedFields;
  const status = node.status;
  if (status !== undefined) {
    node.status = status.conditions === undefined ? {} : { conditions: status.conditions.map((c) => ({ type: c.type, status: c.status })) };
  }
}

/** For kinds whose objects are few (DaemonSets, revisions, PDBs, DriverRollouts): managedFields only. */
export function trimManagedFields(object: { metadata?: { managedFields?: unknown } }): void {
  if (object.metadata !== undefined) delete object.metadata.managedFields;
}

function trimContainer(c: V1Container): V1Container {
  return c.resources === undefined ? { name: c.name } : { name: c.name, resources: c.resources };
}
