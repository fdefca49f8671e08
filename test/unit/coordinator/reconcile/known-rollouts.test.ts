import { describe, expect, it } from 'vitest';
import { KnownRollouts } from '../../../../coordinator/reconcile/known-rollouts.ts';

const labels = (rollout: string) => ({ namespace: 'ns', rollout, driver: 'gpu' });

describe('KnownRollouts', () => {
  it('forgets, once, the rollouts with metrics that a pass did not see', () => {
    const known = new KnownRollouts();
    known.startPass();
    known.seen('ns/a');
    known.seen('ns/b');
    known.recorded('ns/a', labels('a'));
    known.recorded('ns/b', labels('b'));
    expect(known.forgetUnseen()).toEqual([]);

    known.startPass();
    known.seen('ns/a');
    expect(known.forgetUnseen()).toEqual([labels('b')]);
    known.startPass();
    known.seen('ns/a');
    expect(known.forgetUnseen()).toEqual([]);
  });

  it('a rollout seen but without metrics (invalid spec) is never reported', () => {
    const known = new KnownRollouts();
    known.startPass();
    known.seen('ns/bad');
    expect(known.forgetUnseen()).toEqual([]);
    known.startPass();
    expect(known.forgetUnseen()).toEqual([]);
  });
});
