/**
 * The start checks' contract: the first hold in the list wins, and a hold's wake time is when to
 * look again.
 */
import { describe, expect, it } from 'vitest';
import { firstHold, type StartCheck, type StartContext, type StartHold } from '../../../../coordinator/plan/start-checks.ts';
import type { NodeContext } from '../../../../coordinator/plan/step.ts';
import { NOW } from './fixtures.ts';

const holding = (code: StartHold['reason']['code'], wakeAt: number | null): StartCheck => () => ({ reason: { code, message: code, detail: code }, wakeAt });
const passing: StartCheck = () => null;
// firstHold hands these through to the checks and reads nothing of them itself.
const node = {} as NodeContext;
const ctx = {} as StartContext;

describe('firstHold', () => {
  it('gives the hold of the first check that holds, in the list’s order', () => {
    const hold = firstHold([passing, holding('paused', null), holding('no-slot', NOW + 1_000)], node, ctx);
    expect(hold).toEqual({ reason: { code: 'paused', message: 'paused', detail: 'paused' }, wakeAt: null });
  });

  it('keeps the wake time of the hold it gives', () => {
    expect(firstHold([passing, holding('halted', NOW + 5_000), holding('paused', null)], node, ctx)?.wakeAt).toBe(NOW + 5_000);
  });

  it('is null when every check lets the node start', () => {
    expect(firstHold([passing, passing], node, ctx)).toBeNull();
    expect(firstHold([], node, ctx)).toBeNull();
  });
});
