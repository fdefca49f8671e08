/**
 * Replays actions onto a snapshot, as the API server would record them: node metadata and cordon
 * change, deleted or evicted pods become terminating. Used by the shell to overlay its own
 * successful writes until the informers have seen them, and by tests to simulate passes.
 */
import type { UpgradeState } from '../../shared/keys.ts';
import type { NodeAction } from './action.ts';
import { markDeleting } from './mark-deleting.ts';
import { isNodeObjectAction } from './node-patch.ts';
import type { NodeView } from './node-view.ts';
import { applyNodeObjectAction } from './node-view.ts';
import type { ClusterSnapshot, NodeSnapshot } from './snapshot.ts';

export function applyActions(snapshot: ClusterSnapshot, actions: readonly NodeAction[]): ClusterSnapshot {
  if (actions.length === 0) return snapshot;
  const byNode = new Map<string, NodeAction[]>();
  for (const a of actions) {
    const list = byNode.get(a.node);
    if (list === undefined) byNode.set(a.node, [a]);
    else list.push(a);
  }
  return { ...snapshot, nodes: snapshot.nodes.map((n) => applyToNode(n, byNode.get(n.name) ?? [])) };
}

function applyToNode(node: NodeSnapshot, actions: readonly NodeAction[]): NodeSnapshot {
  if (actions.length === 0) return node;
  // The state field of the view is not used here: labels carry the state.
  const view: NodeView = {
    snapshot: node,
    state: 'unknown' satisfies UpgradeState,
    unschedulable: node.unschedulable,
    labels: node.labels,
    annotations: node.annotations,
    ownLabels: false,
    ownAnnotations: false,
  };
  const terminating = new Set<string>();
  for (const a of actions) {
    if (isNodeObjectAction(a)) applyNodeObjectAction(view, a);
    else if (a.kind === 'deletePod' || a.kind === 'evictPod' || a.kind === 'deleteDriverPod') terminating.add(a.pod.uid);
  }
  return {
    ...node,
    labels: view.labels,
    annotations: view.annotations,
    unschedulable: view.unschedulable,
    pods: markDeleting(node.pods, terminating),
    driverPods: markDeleting(node.driverPods, terminating),
  };
}
