import { describe, expect, it } from 'vitest';
import { SpecParseCache } from '../../../../coordinator/reconcile/spec-parse-cache.ts';
import type { DriverRolloutObject } from '../../../../coordinator/status/driver-rollout-object.ts';

function aRollout(uid: string, generation: number, spec: unknown): DriverRolloutObject {
  return { kind: 'DriverRollout', metadata: { name: uid, namespace: 'ns', uid, generation }, spec };
}

describe('SpecParseCache', () => {
  it('parses once per uid and generation', () => {
    const cache = new SpecParseCache();
    const first = cache.parse(aRollout('u1', 1, {}));
    expect(first.ok).toBe(false); // an empty spec names its problems
    expect(cache.parse(aRollout('u1', 1, { anything: 'ignored: same generation' }))).toBe(first);
    expect(cache.parse(aRollout('u1', 2, {}))).not.toBe(first);
    expect(cache.parse(aRollout('u2', 1, {}))).not.toBe(first);
  });
});
