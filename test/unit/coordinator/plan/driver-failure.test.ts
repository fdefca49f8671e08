import { describe, expect, it } from 'vitest';
import { DRIVER_PHASES } from '../../../../agent/report/driver-state.ts';
import { describeFailure } from '../../../../agent/describe-failure.ts';
import { NeverUnloadError } from '../../../../agent/kernel/kernel-errors.ts';
import { AGENT_PROGRESS_REASONS, driverFailure, REBOOT_REQUIRED_REASON } from '../../../../coordinator/plan/driver-failure.ts';
import { aNode } from './fixtures.ts';

const podWith = (status: 'True' | 'False', reason: string) => {
  const pod = aNode('n1').driverNotReady().build().driverPods[0];
  if (pod === undefined) throw new Error('fixture has a driver pod');
  return { ...pod, agentCondition: { status, reason, message: `${reason} message` } };
};

describe('driverFailure', () => {
  it('knows every working phase of the agent, so none of them is taken for a failure', () => {
    // The agent reports its phase as the reason while it works; outcomes are Loaded, NoDevice, Failed.
    const working = DRIVER_PHASES.filter((p) => p !== 'Loaded' && p !== 'NoDevice' && p !== 'Failed');
    expect([...AGENT_PROGRESS_REASONS].sort()).toEqual([...working].sort());
  });

  it.each([
    ['False', 'CompileFailed', true],
    ['False', 'FirmwareMissing', true],
    ['False', 'Building', false],
    ['False', 'Stopping', false],
    ['True', 'Loaded', false],
    ['False', '', false],
  ] as const)('status %s reason %j → failure: %s', (status, reason, failing) => {
    const failure = driverFailure([podWith(status, reason)]);
    expect(failure === null ? null : failure.reason).toBe(failing ? reason : null);
    if (failing) expect(failure?.message).toBe(`${reason} message`);
  });

  it("the agent's never-unload refusal is the reason the coordinator reads as needing a reboot", () => {
    expect(describeFailure('load', new NeverUnloadError('gpu', ['nvidia'], '580.142')).reason).toBe(REBOOT_REQUIRED_REASON);
  });

  it('a pod whose agent has written nothing is not failing', () => {
    const pod = podWith('False', 'CompileFailed');
    expect(driverFailure([{ ...pod, agentCondition: null }])).toBeNull();
  });
});
