import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { driverKeys } from '../../../../shared/keys.ts';
import type { DriverState } from '../../../../agent/report/driver-state.ts';
import { nodeLabelsFor, toLabelValue } from '../../../../agent/report/node-labels.ts';

const keys = driverKeys('gpu', 'nvidia.com');

describe('nodeLabelsFor', () => {
  it.each<{ what: string; state: DriverState; labels: Record<string, string | null> }>([
    {
      what: 'before detection: nothing is known, nothing is written',
      state: { phase: 'Starting', reason: 'Starting', message: '' },
      labels: {},
    },
    {
      what: 'building on a node with 8 GPUs',
      state: { phase: 'Building', reason: 'Building', message: '', deviceCount: 8 },
      labels: { 'driver-rollout.io/gpu.present': 'true', 'driver-rollout.io/gpu.count': '8', 'driver-rollout.io/gpu-driver.ready': 'false' },
    },
    {
      what: 'loaded and verified',
      state: { phase: 'Loaded', reason: 'Loaded', message: '', deviceCount: 8, driverVersion: '570.86.15' },
      labels: {
        'driver-rollout.io/gpu.present': 'true',
        'driver-rollout.io/gpu.count': '8',
        'driver-rollout.io/gpu-driver.ready': 'true',
        'driver-rollout.io/gpu-driver.version': '570.86.15',
      },
    },
    {
      what: 'failed after detection: the version label of an earlier load is left alone',
      state: { phase: 'Failed', reason: 'DriverInUse', message: '', deviceCount: 8 },
      labels: { 'driver-rollout.io/gpu.present': 'true', 'driver-rollout.io/gpu.count': '8', 'driver-rollout.io/gpu-driver.ready': 'false' },
    },
    {
      what: 'unloaded on stop: not ready, no version',
      state: { phase: 'Unloaded', reason: 'Unloaded', message: '' },
      labels: { 'driver-rollout.io/gpu-driver.version': null, 'driver-rollout.io/gpu-driver.ready': 'false' },
    },
    {
      what: 'stopping: the driver stays loaded, the labels stay',
      state: { phase: 'Stopping', reason: 'Stopping', message: '' },
      labels: {},
    },
    {
      what: 'no device: every label removed',
      state: { phase: 'NoDevice', reason: 'NoDevice', message: '', deviceCount: 0 },
      labels: {
        'driver-rollout.io/gpu.present': null,
        'driver-rollout.io/gpu.count': null,
        'driver-rollout.io/gpu-driver.version': null,
        'driver-rollout.io/gpu-driver.ready': null,
      },
    },
  ])('$what', ({ state, labels }) => {
    expect(nodeLabelsFor(keys, state)).toEqual(labels);
  });
});

describe('toLabelValue', () => {
  it.each([
    ['570.86.15', '570.86.15'],
    ['24.10-1.1.4.0', '24.10-1.1.4.0'],
    ['1.0+git abc', '1.0_git_abc'],
    ['-beta-', 'beta'],
  ])('%s → %s', (input, output) => {
    expect(toLabelValue(input)).toBe(output);
  });

  it('always yields a valid label value', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => {
        expect(toLabelValue(s)).toMatch(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/);
        expect(toLabelValue(s).length).toBeLessThanOrEqual(63);
      }),
    );
  });
});
