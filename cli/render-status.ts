import type { UpgradeState } from '../shared/keys.ts';
import { truncate, wrap } from './fit-text.ts';
import { formatDuration } from './format-duration.ts';
import type { NodeView, RolloutView } from './rollout-view.ts';

/** Below this many columns for the reason, it goes on its own line(s) under the node. */
const MIN_INLINE_REASON = 16;
const BAR_MAX = 40;
const BAR_MIN = 10;

const STATE_SHORT: Readonly<Record<UpgradeState, string>> = {
  unknown: 'unknown',
  'upgrade-required': 'required',
  'cordon-required': 'cordon',
  'wait-for-jobs-required': 'wait-jobs',
  'pod-deletion-required': 'pod-deletion',
  'drain-required': 'drain',
  'pod-restart-required': 'pod-restart',
  'validation-required': 'validation',
  'uncordon-required': 'uncordon',
  'upgrade-done': 'done',
  'upgrade-failed': 'FAILED',
};

/**
 * `kubectl driver-rollout status` as lines of at most `width` columns, pure: per rollout a
 * headline with a progress bar, then a table of its nodes (pool, state, time in state, driver
 * version, reason). On a narrow terminal the reason moves under its node, wrapped.
 */
export function renderStatus(views: readonly RolloutView[], width: number): string[] {
  const w = Math.max(20, width);
  if (views.length === 0) return ['No DriverRollouts found.'];
  const lines: string[] = [];
  for (const [i, v] of views.entries()) {
    if (i > 0) lines.push('');
    lines.push(...renderHeadline(v, w), ...renderNodes(v.nodes, w));
  }
  return lines;
}

function renderHeadline(v: RolloutView, width: number): string[] {
  const gateClosed = v.alertGate !== null && v.alertGate.state !== 'open';
  const flags = [v.paused ? 'PAUSED' : '', v.halted ? 'HALTED' : '', gateClosed ? 'ALERT GATE CLOSED' : '', v.failed > 0 ? `${v.failed} failed` : '', v.inProgress > 0 ? `${v.inProgress} in progress` : '']
    .filter((f) => f !== '');
  const title = truncate(`${v.namespace}/${v.name} · driver ${v.driver}${flags.length > 0 ? ` · ${flags.join(' · ')}` : ''}`, width);
  const count = `${v.done}/${v.total} done`;
  const barWidth = Math.min(BAR_MAX, width - count.length - 3);
  const lines = [title];
  if (barWidth >= BAR_MIN) lines.push(`[${bar(v.done, v.total, barWidth)}] ${count}`);
  else lines.push(truncate(count, width));
  if (v.invalidSpec !== null) lines.push(...wrap(`invalid spec: ${v.invalidSpec}`, width));
  // The gate holds new starts only: said once here, and as the reason of every node it holds.
  if (v.alertGate !== null && gateClosed) lines.push(...wrap(`alert gate ${v.alertGate.state}: ${v.alertGate.message}`, width));
  if (v.canary !== null) lines.push(...wrap(canaryLine(v.canary), width));
  if (v.maintenanceWindow !== null) lines.push(...wrap(maintenanceWindowLine(v.maintenanceWindow), width));
  return lines;
}

/** "maintenance window: closed, next opening 2026-11-28T21:00:00Z: Sat 22:00-04:00 Europe/Berlin (2026-11-28T22:00:00)". */
function maintenanceWindowLine(w: NonNullable<RolloutView['maintenanceWindow']>): string {
  const next = w.nextOpening === '' ? 'no opening within a week' : `next opening ${w.nextOpening}${w.nextWindow === '' ? '' : `: ${w.nextWindow}`}`;
  return w.open ? `maintenance window: open${w.closesAt === '' ? '' : ` until ${w.closesAt}`}; ${next}` : `maintenance window: closed (no node starts), ${next}`;
}

/** `canary Soaking until <time> · nodes a, b · revision <r>`, with who approved or why it failed. */
function canaryLine(c: NonNullable<RolloutView['canary']>): string {
  const parts = [
    `canary ${c.phase}${c.phase === 'Soaking' && c.soakUntil !== null ? ` until ${c.soakUntil}` : ''}`,
    `nodes ${c.nodes.join(', ')}`,
    `revision ${c.revision}`,
    ...(c.approvedBy === null ? [] : [`approved by ${c.approvedBy}`]),
    ...(c.phase === 'CanaryFailed' && c.failure !== null ? [`failed: ${c.failure}`] : []),
    ...(c.phase === 'WaitingForApproval' ? ['kubectl driver-rollout approve'] : []),
  ];
  return parts.join(' · ');
}

function bar(done: number, total: number, width: number): string {
  const filled = total === 0 ? 0 : Math.round((Math.min(done, total) / total) * width);
  return '#'.repeat(filled) + '.'.repeat(width - filled);
}

interface Column {
  readonly title: string;
  readonly cell: (n: NodeView) => string;
}

const COLUMNS: readonly Column[] = [
  { title: 'NODE', cell: (n) => n.name },
  { title: 'POOL', cell: (n) => n.pool },
  { title: 'STATE', cell: (n) => `${STATE_SHORT[n.state]}${n.cordoned ? ' (cordoned)' : ''}${n.skipped ? ' (skip)' : ''}` },
  { title: 'AGE', cell: (n) => formatDuration(n.secondsInState) },
  { title: 'DRIVER', cell: (n) => `${n.driverVersion ?? '-'}${n.driverVersion !== null && !n.driverReady ? '*' : ''}` },
];

function renderNodes(nodes: readonly NodeView[], width: number): string[] {
  if (nodes.length === 0) return ['  (no nodes yet)'];
  const widths = COLUMNS.map((c) => Math.max(c.title.length, ...nodes.map((n) => c.cell(n).length)));
  // The first column (node names) gives way first when even the fixed columns do not fit.
  const fixed = widths.reduce((sum, cw) => sum + cw + 2, 0);
  const firstWidth = widths[0] ?? 4;
  if (fixed > width) widths[0] = Math.max(4, firstWidth - (fixed - width));
  const tableWidth = widths.reduce((sum, cw) => sum + cw + 2, 0);
  const reasonWidth = width - tableWidth;
  const inline = reasonWidth >= MIN_INLINE_REASON;
  const row = (cells: readonly string[], reason: string): string => {
    const text = cells.map((c, i) => truncate(c, widths[i] ?? 0).padEnd(widths[i] ?? 0)).join('  ');
    return truncate(inline ? `${text}  ${truncate(reason, reasonWidth)}` : text, width).trimEnd();
  };
  const lines = [row(COLUMNS.map((c) => c.title), inline ? 'REASON' : '')];
  for (const n of nodes) {
    lines.push(row(COLUMNS.map((c) => c.cell(n)), n.reason));
    if (!inline && n.reason !== '') lines.push(...wrap(n.reason, width - 4).map((l) => `    ${l}`));
  }
  if (nodes.some((n) => n.driverVersion !== null && !n.driverReady)) lines.push(truncate('* driver pod not Ready', width));
  const nextKernel = nodes.filter((n) => n.nextKernelFailed !== null).map((n) => (n.nextKernelFailed === '' ? n.name : `${n.name} (${n.nextKernelFailed})`));
  if (nextKernel.length > 0) lines.push(...wrap(`driver does not build for the next kernel on: ${nextKernel.join(', ')}`, width));
  return lines;
}
