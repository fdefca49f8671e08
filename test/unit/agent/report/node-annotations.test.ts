import { describe, expect, it } from 'vitest';
import type { DriverState } from '../../../../agent/report/driver-state.ts';
import { nodeAnnotationsFor } from '../../../../agent/report/node-annotations.ts';
import { driverKeys } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu', 'nvidia.com');
const KEY = 'driver-rollout.io/gpu-driver-loaded';
const LOADED = '{"pod":"ns/p","driver":{"version":"570.86.15"}}';

describe('nodeAnnotationsFor', () => {
  it.each<{ what: string; state: DriverState; annotations: Record<string, string | null> }>([
    { what: 'loaded and verified (a reload or the fast path): what and by whom', state: { phase: 'Loaded', reason: 'Loaded', message: '', loadedDriver: LOADED }, annotations: { [KEY]: LOADED } },
    { what: 'loaded without a cluster identity: left alone', state: { phase: 'Loaded', reason: 'Loaded', message: '' }, annotations: {} },
    { what: 'failed: removed (a failed load may have left nothing loaded)', state: { phase: 'Failed', reason: 'LoadFailed', message: '' }, annotations: { [KEY]: null } },
    { what: 'unloaded on stop: removed', state: { phase: 'Unloaded', reason: 'Unloaded', message: '' }, annotations: { [KEY]: null } },
    { what: 'no device: removed', state: { phase: 'NoDevice', reason: 'NoDevice', message: '', deviceCount: 0 }, annotations: { [KEY]: null } },
    { what: 'stopping: the driver stays loaded, the annotation stays', state: { phase: 'Stopping', reason: 'Stopping', message: '' }, annotations: {} },
    { what: 'building or loading: left as it is until verified', state: { phase: 'Loading', reason: 'Loading', message: '' }, annotations: {} },
  ])('$what', ({ state, annotations }) => {
    expect(nodeAnnotationsFor(keys, state)).toEqual(annotations);
  });
});
