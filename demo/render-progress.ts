import type { UpgradeState } from '../shared/keys.ts';

/** One node as the demo shows it. */
export interface NodeRow {
  readonly name: string;
  readonly pool: string;
  readonly state: UpgradeState;
  readonly cordoned: boolean;
  readonly driverVersion: string | undefined;
  readonly driverReady: boolean;
  readonly reason: string | undefined;
}

const STATE_SHORT: Readonly<Record<UpgradeState, string>> = {
  unknown: 'unknown',
  'upgrade-required': 'required',
  'cordon-required': 'cordon',
  'wait-for-jobs-required': 'wait-jobs',
  'pod-deletion-required': 'pod-delete',
  'drain-required': 'drain',
  'pod-restart-required': 'pod-restart',
  'validation-required': 'validation',
  'uncordon-required': 'uncordon',
  'upgrade-done': 'done',
  'upgrade-failed': 'FAILED',
};

/** A fixed-width table of the nodes, one line each, sorted by pool and name. */
export function renderProgress(rows: readonly NodeRow[], elapsedSeconds: number, title: string): string {
  const sorted = [...rows].sort((a, b) => a.pool.localeCompare(b.pool) || a.name.localeCompare(b.name));
  const lines = [`── ${title} · ${elapsedSeconds.toFixed(1)} s ${'─'.repeat(Math.max(0, 60 - title.length))}`];
  lines.push(`${'NODE'.padEnd(12)} ${'POOL'.padEnd(5)} ${'STATE'.padEnd(12)} ${'SCHED'.padEnd(9)} ${'DRIVER'.padEnd(9)} REASON`);
  for (const r of sorted) {
    lines.push(
      `${r.name.padEnd(12)} ${r.pool.padEnd(5)} ${STATE_SHORT[r.state].padEnd(12)} ${(r.cordoned ? 'cordoned' : 'ok').padEnd(9)} ` +
        `${`${r.driverVersion ?? '-'}${r.driverReady ? '' : '*'}`.padEnd(9)} ${r.reason ?? ''}`,
    );
  }
  lines.push('(* = driver pod not Ready)');
  return lines.join('\n');
}

/** Nodes out of service (cordoned or not Ready driver) per pool, to check the limits as they move. */
export function unavailableByPool(rows: readonly NodeRow[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rows) {
    if (r.cordoned) out.set(r.pool, (out.get(r.pool) ?? 0) + 1);
    else if (!out.has(r.pool)) out.set(r.pool, 0);
  }
  return out;
}
