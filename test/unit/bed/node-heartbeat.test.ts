import { describe, expect, it } from 'vitest';
import { DEFAULT_NODE_HEARTBEAT, KWOK_DEFAULT_LEASE_WORKERS, kwokLeaseWorkers, MAX_LEASE_RENEWALS_PER_SECOND, nodeHeartbeatFor, PATIENT_NODE_HEARTBEAT } from '../../../test/bed/node-heartbeat.ts';

describe('nodeHeartbeatFor', () => {
  it.each([1, 200, 1_000])('keeps a kubelet\'s and the controller manager\'s defaults for %i nodes', (nodes) => {
    expect(nodeHeartbeatFor(nodes)).toEqual(DEFAULT_NODE_HEARTBEAT);
    expect(DEFAULT_NODE_HEARTBEAT).toEqual({ leaseDurationSeconds: 40, monitorGracePeriodSeconds: 50 });
  });

  it.each([
    [1_001, { leaseDurationSeconds: 41, monitorGracePeriodSeconds: 52 }],
    [5_000, { leaseDurationSeconds: 200, monitorGracePeriodSeconds: 250 }],
    [10_000, { leaseDurationSeconds: 400, monitorGracePeriodSeconds: 500 }],
  ])('keeps the renewals of %i nodes at the test bed\'s rate with a longer Lease: %o', (nodes, heartbeat) => {
    expect(nodeHeartbeatFor(nodes)).toEqual(heartbeat);
    expect(nodes / (heartbeat.leaseDurationSeconds / 4)).toBeLessThanOrEqual(MAX_LEASE_RENEWALS_PER_SECOND);
  });

  it('gives 5,000 nodes a 200 s Lease (renewed every 50 s) and NotReady after 250 s without a renewal', () => {
    expect(nodeHeartbeatFor(5_000)).toEqual({ leaseDurationSeconds: 200, monitorGracePeriodSeconds: 250 });
  });

  it.each([
    [1_000, { leaseDurationSeconds: 40, monitorGracePeriodSeconds: 50 }],
    [2_500, { leaseDurationSeconds: 100, monitorGracePeriodSeconds: 125 }],
    [7_777, { leaseDurationSeconds: 312, monitorGracePeriodSeconds: 390 }],
  ])('turns a node NotReady after the defaults\' 5 missed renewals at %i nodes: %o', (nodes, heartbeat) => {
    expect(nodeHeartbeatFor(nodes)).toEqual(heartbeat);
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
