/**
 * Pool membership, as in the SR-IOV parallel-drain design: a node matching no pool's nodeSelector
 * belongs to the default pool; a node matching two or more pools belongs to none and is left alone
 * (reported), because no single limit can be said to govern it.
 */
import type { DriverRolloutPolicy, PoolPolicy } from '../policy/driver-rollout-spec.ts';
import { matchesSelector } from '../policy/label-selector.ts';

export type PoolAssignment =
  | { readonly kind: 'pool'; readonly pool: PoolPolicy }
  | { readonly kind: 'conflict'; readonly pools: readonly string[] };

export function assignPool(labels: Readonly<Record<string, string>>, policy: DriverRolloutPolicy): PoolAssignment {
  let match: PoolPolicy | null = null;
  let conflict: string[] | null = null;
  for (const pool of policy.pools) {
    if (pool.nodeSelector === null || !matchesSelector(pool.nodeSelector, labels)) continue;
    if (match === null) {
      match = pool;
      continue;
    }
    conflict ??= [match.name];
    conflict.push(pool.name);
  }
  if (conflict !== null) return { kind: 'conflict', pools: conflict };
  return membershipOf(match ?? policy.defaultPool);
}

/** One assignment object per pool, shared by its thousands of nodes (assignments are never modified). */
const memberships = new WeakMap<PoolPolicy, PoolAssignment>();

function membershipOf(pool: PoolPolicy): PoolAssignment {
  let membership = memberships.get(pool);
  if (membership === undefined) memberships.set(pool, (membership = { kind: 'pool', pool }));
  return membership;
}
