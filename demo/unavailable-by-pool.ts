import type { UpgradeState } from '../shared/keys.ts';

/** One node as the demo's limit check sees it. */
export interface NodeRow {
  readonly name: string;
  readonly pool: string;
  readonly state: UpgradeState;
  readonly cordoned: boolean;
  readonly driverVersion: string | undefined;
  readonly driverReady: boolean;
}

/** Nodes out of service (cordoned) per pool, to check the limits as they move. */
export function unavailableByPool(rows: readonly NodeRow[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rows) {
    if (r.cordoned) out.set(r.pool, (out.get(r.pool) ?? 0) + 1);
    else if (!out.has(r.pool)) out.set(r.pool, 0);
  }
  return out;
}
