import { describe, expect, it } from 'vitest';
import type { DriverState } from '../../../../agent/report/driver-state.ts';
import { driverCondition, rfc3339 } from '../../../../agent/report/pod-condition.ts';

const type = 'nvidia.com/gpu-driver-ready';
const now = new Date('2026-11-22T03:00:00.750Z');
const earlier = new Date('2026-11-22T02:00:00Z');

const building: DriverState = { phase: 'Building', reason: 'Building', message: 'compiling for 6.1.0-56-amd64' };
const loaded: DriverState = { phase: 'Loaded', reason: 'Loaded', message: 'nvidia 570.86.15 loaded', driverVersion: '570.86.15' };
const noDevice: DriverState = { phase: 'NoDevice', reason: 'NoDevice', message: 'no NVIDIA GPU on this node' };
const failed: DriverState = { phase: 'Failed', reason: 'KernelHeadersMissing', message: 'Failed: install linux-headers-6.1.0-56-amd64' };

describe('driverCondition', () => {
  it.each([
    { state: building, status: 'False' },
    { state: loaded, status: 'True' },
    { state: noDevice, status: 'True' },
    { state: failed, status: 'False' },
  ])('$state.phase → status $status with the state reason and message', ({ state, status }) => {
    expect(driverCondition(type, state, undefined, now)).toEqual({
      type,
      status,
      reason: state.reason,
      message: state.message,
      lastTransitionTime: '2026-11-22T03:00:00Z',
    });
  });

  it('keeps lastTransitionTime while the status stays the same, moves it when the status changes', () => {
    const prevFalse = { status: 'False', lastTransitionTime: earlier };
    expect(driverCondition(type, building, prevFalse, now).lastTransitionTime).toBe('2026-11-22T02:00:00Z');
    expect(driverCondition(type, failed, prevFalse, now).lastTransitionTime).toBe('2026-11-22T02:00:00Z');
    expect(driverCondition(type, loaded, prevFalse, now).lastTransitionTime).toBe('2026-11-22T03:00:00Z');
  });

  it('truncates very long messages (a compiler log) so the pod status stays readable', () => {
    const long: DriverState = { ...failed, message: 'x'.repeat(10_000) };
    expect(driverCondition(type, long, undefined, now).message.length).toBeLessThanOrEqual(1024);
  });
});

describe('rfc3339', () => {
  it('drops milliseconds', () => {
    expect(rfc3339(now)).toBe('2026-11-22T03:00:00Z');
  });
});
