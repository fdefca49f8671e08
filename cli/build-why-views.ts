import type { CoreV1Event, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { compileLabelSelector, matchesSelector } from '../coordinator/policy/label-selector.ts';
import { driverKeys } from '../shared/keys.ts';
import type { RolloutView } from './rollout-view.ts';
import type { EventView, PdbView, PodOnNode, WhyView } from './render-why.ts';

const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';
const MAX_EVENTS = 10;

export interface WhyInput {
  readonly node: string;
  /** Views of the rollouts to explain (those managing the node keep it in their `nodes`). */
  readonly rollouts: readonly RolloutView[];
  readonly pods: readonly V1Pod[];
  readonly pdbs: readonly V1PodDisruptionBudget[];
  readonly events: readonly CoreV1Event[];
  readonly nowMs: number;
}

/** One WhyView per rollout that manages the node, pure. */
export function buildWhyViews(input: WhyInput): WhyView[] {
  const events = recentEvents(input.events, input.nowMs);
  const out: WhyView[] = [];
  for (const r of input.rollouts) {
    const node = r.nodes.find((n) => n.name === input.node);
    if (node === undefined) continue;
    const keys = driverKeys(r.driver, r.keyDomain);
    const pods = input.pods.filter((p) => isEvictable(p, keys.drainSkip));
    const covering = new Map<string, PdbView>();
    const podViews: PodOnNode[] = pods.map((p) => {
      const pdbs = input.pdbs.filter((b) => covers(b, p));
      for (const b of pdbs) covering.set(`${b.metadata?.namespace ?? ''}/${b.metadata?.name ?? ''}`, pdbView(b));
      const owner = p.metadata?.ownerReferences?.[0];
      return {
        namespace: p.metadata?.namespace ?? '',
        name: p.metadata?.name ?? '',
        owner: owner === undefined ? 'no controller' : `${owner.kind} ${owner.name}`,
        pdbs: pdbs.map((b) => b.metadata?.name ?? ''),
      };
    });
    out.push({ rollout: `${r.namespace}/${r.name} (driver ${r.driver})`, node, pods: podViews, pdbs: [...covering.values()], events });
  }
  return out;
}

/** What a drain would evict: not DaemonSet or mirror pods, not drain-skip pods, not finished pods. */
function isEvictable(pod: V1Pod, drainSkipLabel: string): boolean {
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return false;
  if (pod.metadata?.annotations?.[MIRROR_POD_ANNOTATION] !== undefined) return false;
  if (pod.metadata?.labels?.[drainSkipLabel] === 'true') return false;
  return !(pod.metadata?.ownerReferences ?? []).some((o) => o.kind === 'DaemonSet');
}

function covers(pdb: V1PodDisruptionBudget, pod: V1Pod): boolean {
  if (pdb.metadata?.namespace !== pod.metadata?.namespace || pdb.spec?.selector === undefined) return false;
  const compiled = compileLabelSelector(pdb.spec.selector);
  // An empty PDB selector matches every pod of its namespace (policy/v1).
  return compiled.ok && matchesSelector(compiled.selector, pod.metadata?.labels ?? {});
}

function pdbView(b: V1PodDisruptionBudget): PdbView {
  return {
    namespace: b.metadata?.namespace ?? '',
    name: b.metadata?.name ?? '',
    disruptionsAllowed: b.status?.disruptionsAllowed ?? 0,
    currentHealthy: b.status?.currentHealthy ?? 0,
    desiredHealthy: b.status?.desiredHealthy ?? 0,
  };
}

function recentEvents(events: readonly CoreV1Event[], nowMs: number): EventView[] {
  const at = (e: CoreV1Event): number => {
    const t = e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata.creationTimestamp;
    return t === undefined ? 0 : new Date(t).getTime();
  };
  return [...events]
    .sort((a, b) => at(b) - at(a))
    .slice(0, MAX_EVENTS)
    .map((e) => ({
      secondsAgo: at(e) === 0 ? null : Math.max(0, Math.round((nowMs - at(e)) / 1000)),
      type: e.type ?? 'Normal',
      reason: e.reason ?? '',
      message: (e.message ?? '').trim(),
      count: e.count ?? 1,
    }));
}
