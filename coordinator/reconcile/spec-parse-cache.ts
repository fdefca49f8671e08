import { parseDriverRolloutSpec, type ParseResult } from '../policy/driver-rollout-spec.ts';
import type { DriverRolloutObject } from '../status/driver-rollout-object.ts';

/** Parsed DriverRollout specs by uid, parsed again only when the generation changes. */
export class SpecParseCache {
  readonly #parsed = new Map<string, { generation: number; result: ParseResult }>();

  parse(rollout: DriverRolloutObject): ParseResult {
    const uid = rollout.metadata?.uid ?? '';
    const generation = rollout.metadata?.generation ?? 0;
    const hit = this.#parsed.get(uid);
    if (hit?.generation === generation) return hit.result;
    const result = parseDriverRolloutSpec(rollout.spec);
    this.#parsed.set(uid, { generation, result });
    return result;
  }
}
