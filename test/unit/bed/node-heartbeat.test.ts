import { describe, expect, it } from 'vitest';
import { DEFAULT_NODE_HEARTBEAT, KWOK_DEFAULT_LEASE_WORKERS, kwokLeaseWorkers, nodeHeartbeatFor, PATIENT_NODE_HEARTBEAT } from '../../../test/bed/node-heartbeat.ts';

describe('nodeHeartbeatFor', () => {
  it.each([1, 200, 1_000])('keeps a kubelet\'s and the controller manager\'s defaults for %i nodes', (nodes) => {
    expect(nodeHeartbeatFor(nodes)).toEqual(DEFAULT_NODE_HEARTBEAT);
    expect(DEFAULT_NODE_HEARTBEAT).toEqual({ leaseDurationSeconds: 40, monitorGracePeriodSeconds: 50 });
  });

  it.each([
    [1_000, { leaseDurationSeconds: 40, monitorGracePeriodSeconds: 50 }, 100],
    [1_001, { leaseDurationSeconds: 41, monitorGracePeriodSeconds: 52 }, 97.66],
    [2_500, { leaseDurationSeconds: 100, monitorGracePeriodSeconds: 125 }, 100],
    [5_000, { leaseDurationSeconds: 200, monitorGracePeriodSeconds: 250 }, 100],
    [7_777, { leaseDurationSeconds: 312, monitorGracePeriodSeconds: 390 }, 99.71],
    [10_000, { leaseDurationSeconds: 400, monitorGracePeriodSeconds: 500 }, 100],
  ])('gives %i nodes %o: NotReady after the defaults\' 5 missed renewals, %f Lease renewals a second', (nodes, heartbeat, renewalsPerSecond) => {
    expect(nodeHeartbeatFor(nodes)).toEqual(heartbeat);
    expect(nodes / (heartbeat.leaseDurationSeconds / 4)).toBeCloseTo(renewalsPerSecond, 2);
  });
});

describe('nodeHeartbeatFor with a longer least heartbeat (the bench\'s)', () => {
  it('keeps the least heartbeat while its renewals stay at or under the test bed\'s rate', () => {
    expect(nodeHeartbeatFor(200, PATIENT_NODE_HEARTBEAT)).toEqual(PATIENT_NODE_HEARTBEAT);
    expect(nodeHeartbeatFor(5_000, PATIENT_NODE_HEARTBEAT)).toEqual(PATIENT_NODE_HEARTBEAT);
  });

  it('grows the Lease past it where the renewals would exceed the rate', () => {
    expect(nodeHeartbeatFor(10_000, PATIENT_NODE_HEARTBEAT)).toEqual({ leaseDurationSeconds: 400, monitorGracePeriodSeconds: 500 });
  });
});

describe('kwokLeaseWorkers', () => {
  it.each([
    [200, DEFAULT_NODE_HEARTBEAT, KWOK_DEFAULT_LEASE_WORKERS],
    [200, PATIENT_NODE_HEARTBEAT, KWOK_DEFAULT_LEASE_WORKERS],
    [1_000, DEFAULT_NODE_HEARTBEAT, 20],
    [5_000, PATIENT_NODE_HEARTBEAT, 17],
    [10_000, nodeHeartbeatFor(10_000, PATIENT_NODE_HEARTBEAT), 20],
  ])('gives %i nodes with %o a renewal of every Lease each quarter of its duration: %i workers', (nodes, heartbeat, workers) => {
    expect(kwokLeaseWorkers(nodes, heartbeat)).toBe(workers);
  });
});
