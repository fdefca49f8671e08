import { truncate, wrap } from './fit-text.ts';
import { formatDuration } from './format-duration.ts';
import type { NodeView } from './rollout-view.ts';

/** A pod still on the node, and the PDBs that cover it. */
export interface PodOnNode {
  readonly namespace: string;
  readonly name: string;
  readonly owner: string;
  readonly pdbs: readonly string[];
}

export interface PdbView {
  readonly namespace: string;
  readonly name: string;
  readonly disruptionsAllowed: number;
  readonly currentHealthy: number;
  readonly desiredHealthy: number;
}

export interface EventView {
  readonly secondsAgo: number | null;
  readonly type: string;
  readonly reason: string;
  readonly message: string;
  readonly count: number;
}

/** What `why NODE` shows for one rollout that manages the node. */
export interface WhyView {
  readonly rollout: string;
  readonly node: NodeView;
  /** Pods a drain of this node would have to evict (not DaemonSet, mirror or drain-skip pods). */
  readonly pods: readonly PodOnNode[];
  readonly pdbs: readonly PdbView[];
  readonly events: readonly EventView[];
}

/** `kubectl driver-rollout why NODE` as lines of at most `width` columns, pure. */
export function renderWhy(views: readonly WhyView[], nodeName: string, width: number): string[] {
  const w = Math.max(20, width);
  if (views.length === 0) return wrap(`Node ${nodeName} is not managed by any DriverRollout found (no upgrade-state label, no driver pod).`, w);
  const lines: string[] = [];
  for (const [i, v] of views.entries()) {
    if (i > 0) lines.push('');
    const n = v.node;
    lines.push(truncate(`${n.name} · ${v.rollout} · ${n.state} for ${formatDuration(n.secondsInState)}`, w));
    lines.push(...wrap(`reason: ${n.reason === '' ? (n.state === 'upgrade-done' ? 'none (upgrade done)' : 'none given') : n.reason}`, w));
    const facts = [
      n.cordoned ? 'cordoned' : 'schedulable',
      n.skipped ? 'skip label set' : '',
      `driver ${n.driverVersion ?? 'not loaded'}${n.driverVersion !== null ? (n.driverReady ? ' (ready)' : ' (not ready)') : ''}`,
      `pool ${n.pool}`,
    ].filter((f) => f !== '');
    lines.push(...wrap(facts.join(' · '), w));
    lines.push(`pods a drain would evict (${v.pods.length}):`);
    if (v.pods.length === 0) lines.push('  none');
    for (const p of v.pods) {
      const covered = p.pdbs.length > 0 ? ` · PDB ${p.pdbs.join(', ')}` : '';
      lines.push(...wrap(`${p.namespace}/${p.name} (${p.owner})${covered}`, w - 2).map((l) => `  ${l}`));
    }
    if (v.pdbs.length > 0) {
      lines.push('PodDisruptionBudgets:');
      for (const b of v.pdbs) {
        const blocking = b.disruptionsAllowed === 0 ? ' · BLOCKS EVICTION' : '';
        lines.push(...wrap(`${b.namespace}/${b.name}: ${b.disruptionsAllowed} disruptions allowed, ${b.currentHealthy}/${b.desiredHealthy} healthy${blocking}`, w - 2).map((l) => `  ${l}`));
      }
    }
    lines.push(`recent events (${v.events.length}):`);
    if (v.events.length === 0) lines.push('  none');
    for (const e of v.events) {
      const head = `${formatDuration(e.secondsAgo)} ${e.type} ${e.reason}${e.count > 1 ? ` (x${e.count})` : ''}: `;
      lines.push(...wrap(`${head}${e.message}`, w - 2).map((l) => `  ${l}`));
    }
  }
  return lines;
}
