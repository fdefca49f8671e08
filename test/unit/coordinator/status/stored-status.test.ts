import { describe, expect, it } from 'vitest';
import type { RolloutCondition } from '../../../../coordinator/plan/action.ts';
import { invalidSpecConditions } from '../../../../coordinator/status/invalid-spec-status.ts';
import { isSameJson, newlyTrue, stampConditions } from '../../../../coordinator/status/stored-status.ts';

const cond = (type: RolloutCondition['type'], status: 'True' | 'False'): RolloutCondition => ({ type, status, reason: type, message: '' });
const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:05:00.000Z';

describe('stampConditions', () => {
  it.each([
    { name: 'keeps the transition time while the status holds', before: 'True', now: 'True', expected: T0 },
    { name: 'moves it when the status flips', before: 'True', now: 'False', expected: T1 },
  ] as const)('$name', ({ before, now, expected }) => {
    const previous = { conditions: [{ type: 'Progressing', status: before, lastTransitionTime: T0 }] };
    const [stamped] = stampConditions(previous, [cond('Progressing', now)], 4, T1);
    expect(stamped).toMatchObject({ lastTransitionTime: expected, observedGeneration: 4 });
  });

  it('stamps new conditions now, whatever the previous status looked like', () => {
    for (const previous of [undefined, null, {}, { conditions: 'garbage' }]) {
      expect(stampConditions(previous, [cond('Complete', 'True')], 1, T1)[0]?.lastTransitionTime).toBe(T1);
    }
  });
});

describe('newlyTrue', () => {
  it('names only conditions that turned True (for one Event per transition)', () => {
    const previous = { conditions: [{ type: 'Halted', status: 'False' }, { type: 'Paused', status: 'True' }] };
    expect(newlyTrue(previous, [cond('Halted', 'True'), cond('Paused', 'True'), cond('Complete', 'False')]).map((c) => c.type)).toEqual(['Halted']);
  });
});

describe('invalidSpecConditions', () => {
  it('puts every problem with its field path in the InvalidSpec message', () => {
    const [invalid, progressing] = invalidSpecConditions([
      { path: 'spec.upgradePolicy.drain.podSelector', message: 'invalid value list' },
      { path: 'spec.pools[1].name', message: 'duplicate pool name "a"' },
    ]);
    expect(invalid).toEqual({
      type: 'InvalidSpec', status: 'True', reason: 'InvalidSpec',
      message: 'spec.upgradePolicy.drain.podSelector: invalid value list; spec.pools[1].name: duplicate pool name "a"',
    });
    expect(progressing).toMatchObject({ type: 'Progressing', status: 'False' });
  });
});

describe('isSameJson', () => {
  it.each([
    { a: { x: 1, y: [1, { z: 2 }] }, b: { y: [1, { z: 2 }], x: 1 }, same: true },
    { a: { x: 1, gone: undefined }, b: { x: 1 }, same: true },
    { a: { x: 1 }, b: { x: 2 }, same: false },
    { a: [1, 2], b: [2, 1], same: false },
    { a: { x: [] }, b: { x: {} }, same: false },
    { a: undefined, b: {}, same: false },
  ])('$a vs $b: $same', ({ a, b, same }) => {
    expect(isSameJson(a, b)).toBe(same);
  });
});
