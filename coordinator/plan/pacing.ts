/**
 * Pacing per pool (ours): a minimum delay between node starts (`minSecondsBetweenStarts`) and a
 * soak after each node's upgrade (`soakSecondsAfterUpgrade`).
 *
 * Both are read from the nodes, so a restarted or new leader keeps the pace (the cluster is the
 * only memory):
 * - the pool's last start is the latest `last-start-time` (written at every start while the pool
 *   paces, kept after upgrade-done) or `upgrade-start-time` (a cycle under way) of its nodes;
 * - a node soaks while it is in upgrade-done and its `done-time` (written when it reaches
 *   upgrade-done from an upgrade, while the pool soaks) is less than the soak ago.
 *
 * A soaking node keeps its parallel slot (maxParallelUpgrades) until the soak ends; once
 * uncordoned and Ready it holds no unavailable slot (pool-capacity.ts counts it as any done
 * node). With maxParallelUpgrades 0 there is no parallel slot to keep, and the soak holds nothing.
 */
import type { PoolPolicy } from '../policy/driver-rollout-spec.ts';
import type { NodeAction } from './action.ts';
import { readUnixSeconds, toUnixSeconds } from './node-view.ts';
import type { PoolBudget } from './pool-capacity.ts';
import type { StartCheck, StartHold } from './start-checks.ts';
import type { NodeContext, StepContext } from './step.ts';

/** What a pool's pacing needs to know, counted from its nodes before the pass. */
export interface PoolPacing {
  readonly pool: PoolPolicy;
  /** ms since epoch; null: no start known. */
  lastStartAt: number | null;
  /** Nodes soaking now. */
  soaking: number;
  /** When the first of them ends its soak (ms since epoch); null when none soaks. */
  firstSoakEnd: number | null;
}

export function createPacing(pool: PoolPolicy): PoolPacing {
  return { pool, lastStartAt: null, soaking: 0, firstSoakEnd: null };
}

/** Counts one pool node as the snapshot shows it. */
export function countPacing(pacing: PoolPacing, node: NodeContext, ctx: StepContext): void {
  const { keys } = ctx.policy;
  const annotations = node.view.annotations;
  if (pacing.pool.minSecondsBetweenStarts > 0) {
    for (const key of [keys.lastStartTime, keys.upgradeStartTime]) {
      const at = readUnixSeconds(annotations, key);
      if (at !== null && (pacing.lastStartAt === null || at > pacing.lastStartAt)) pacing.lastStartAt = at;
    }
  }
  const soakEnd = soakEndOf(node, ctx, pacing.pool);
  if (soakEnd !== null && ctx.now < soakEnd) countSoaking(pacing, soakEnd);
}

/** A node of the pool reaches upgrade-done from an upgrade in this pass: it soaks from `now`. */
export function countSoakStart(pacing: PoolPacing, now: number): void {
  countSoaking(pacing, now + pacing.pool.soakSecondsAfterUpgrade * 1000);
}

function countSoaking(pacing: PoolPacing, soakEnd: number): void {
  pacing.soaking++;
  pacing.firstSoakEnd = pacing.firstSoakEnd === null ? soakEnd : Math.min(pacing.firstSoakEnd, soakEnd);
}

/** When the node's soak ends (ms); null when it does not soak (not done from an upgrade, or the pool does not soak). */
function soakEndOf(node: NodeContext, ctx: StepContext, pool: PoolPolicy): number | null {
  if (pool.soakSecondsAfterUpgrade === 0 || node.view.state !== 'upgrade-done') return null;
  const doneAt = readUnixSeconds(node.view.annotations, ctx.policy.keys.upgradeDoneTime);
  return doneAt === null ? null : doneAt + pool.soakSecondsAfterUpgrade * 1000;
}

/** A node of this pool starts now: the next start waits the delay from here. */
export function recordStart(pacing: PoolPacing, now: number): void {
  pacing.lastStartAt = now;
}

/** The annotation a start writes while its pool paces starts (none otherwise). */
export function startPacingActions(node: NodeContext, ctx: StepContext): NodeAction[] {
  if (node.pool.kind !== 'pool' || node.pool.pool.minSecondsBetweenStarts === 0) return [];
  return [{ kind: 'setAnnotation', node: node.view.snapshot.name, key: ctx.policy.keys.lastStartTime, value: toUnixSeconds(ctx.now) }];
}

/** The annotation reaching upgrade-done from an upgrade writes while the pool soaks (none otherwise). */
export function donePacingActions(node: NodeContext, ctx: StepContext): NodeAction[] {
  if (node.pool.kind !== 'pool' || node.pool.pool.soakSecondsAfterUpgrade === 0) return [];
  return [{ kind: 'setAnnotation', node: node.view.snapshot.name, key: ctx.policy.keys.upgradeDoneTime, value: toUnixSeconds(ctx.now) }];
}

/** Whether a node that this pass moves into upgrade-done starts a soak that keeps its parallel slot. */
export function startsSoak(node: NodeContext): boolean {
  return node.pool.kind === 'pool' && node.pool.pool.soakSecondsAfterUpgrade > 0 && node.view.state === 'upgrade-done';
}

/**
 * The pacing hold: the pool's last start is less than minSecondsBetweenStarts ago, or the free
 * parallel slots are all kept by soaking nodes. Each wakes the planner when it ends.
 */
export const isPaced: StartCheck = (node, ctx) => {
  if (node.pool.kind !== 'pool') return null;
  const pacing = ctx.pacing.get(node.pool.pool.name);
  const budget = ctx.budgets.get(node.pool.pool.name);
  if (pacing === undefined || budget === undefined) return null;
  return delayHold(pacing, ctx.now) ?? soakHold(pacing, budget);
};

function delayHold(pacing: PoolPacing, now: number): StartHold | null {
  const delay = pacing.pool.minSecondsBetweenStarts;
  if (delay === 0 || pacing.lastStartAt === null) return null;
  const next = pacing.lastStartAt + delay * 1000;
  if (now >= next) return null;
  const name = pacing.pool.name;
  return {
    reason: {
      code: 'start-delay',
      message: `pacing: pool ${name} starts a node at most every ${delay}s (minSecondsBetweenStarts)`,
      detail: `pacing: last start in pool ${name} ${Math.floor((now - pacing.lastStartAt) / 1000)}s ago, next in ${Math.ceil((next - now) / 1000)}s (minSecondsBetweenStarts ${delay})`,
    },
    wakeAt: next,
  };
}

function soakHold(pacing: PoolPacing, budget: PoolBudget): StartHold | null {
  const parallel = pacing.pool.maxParallelUpgrades;
  if (pacing.soaking === 0 || parallel === 0 || budget.upgrading >= parallel || budget.upgrading + pacing.soaking < parallel) return null;
  const name = pacing.pool.name;
  return {
    reason: {
      code: 'upgrade-soak',
      message: `pacing: upgraded nodes in pool ${name} soak ${pacing.pool.soakSecondsAfterUpgrade}s before their slot is handed on (soakSecondsAfterUpgrade)`,
      detail: `pacing: ${pacing.soaking} soaking and ${budget.upgrading} upgrading of ${parallel} parallel slots in pool ${name}`,
    },
    wakeAt: pacing.firstSoakEnd,
  };
}
