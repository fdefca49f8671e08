import { describe, expect, it } from 'vitest';
import { DEFAULT_NODE_HEARTBEAT, MAX_LEASE_RENEWALS_PER_SECOND, nodeHeartbeatFor, PATIENT_NODE_HEARTBEAT } from '../../../test/bed/node-heartbeat.ts';

/** KWOK renews a node's Lease every quarter of its duration, as a kubelet does. */
const renewalsPerSecond = (nodes: number): number => nodes / (nodeHeartbeatFor(nodes).leaseDurationSeconds / 4);

describe('nodeHeartbeatFor', () => {
  it.each([1, 200, 1_000])('keeps a kubelet\'s and the controller manager\'s defaults for %i nodes', (nodes) => {
    expect(nodeHeartbeatFor(nodes)).toEqual(DEFAULT_NODE_HEARTBEAT);
    expect(DEFAULT_NODE_HEARTBEAT).toEqual({ leaseDurationSeconds: 40, monitorGracePeriodSeconds: 50 });
  });

  it.each([1_001, 5_000, 10_000])('keeps the renewals of %i nodes at or under the test bed\'s rate', (nodes) => {
    expect(renewalsPerSecond(nodes)).toBeLessThanOrEqual(MAX_LEASE_RENEWALS_PER_SECOND);
    expect(nodeHeartbeatFor(nodes).leaseDurationSeconds).toBeGreaterThan(DEFAULT_NODE_HEARTBEAT.leaseDurationSeconds);
  });

  it('gives 5,000 nodes a 200 s Lease (renewed every 50 s) and NotReady after 250 s without a renewal', () => {
    expect(nodeHeartbeatFor(5_000)).toEqual({ leaseDurationSeconds: 200, monitorGracePeriodSeconds: 250 });
  });

  it.each([1_000, 2_500, 5_000, 7_777])('waits as many renewal intervals before NotReady as the defaults (5) at %i nodes', (nodes) => {
    const { leaseDurationSeconds, monitorGracePeriodSeconds } = nodeHeartbeatFor(nodes);
    expect(monitorGracePeriodSeconds / (leaseDurationSeconds / 4)).toBeGreaterThanOrEqual(5);
    expect(monitorGracePeriodSeconds / (leaseDurationSeconds / 4)).toBeLessThan(5.1);
  });
});

describe('nodeHeartbeatFor with a longer least heartbeat (the bench\'s)', () => {
  it('keeps the least heartbeat while its renewals stay at or under the test bed\'s rate', () => {
    expect(nodeHeartbeatFor(200, PATIENT_NODE_HEARTBEAT)).toEqual(PATIENT_NODE_HEARTBEAT);
    expect(nodeHeartbeatFor(5_000, PATIENT_NODE_HEARTBEAT)).toEqual(PATIENT_NODE_HEARTBEAT);
  });

  it('grows the Lease past it where the renewals would exceed the rate', () => {
    const heartbeat = nodeHeartbeatFor(10_000, PATIENT_NODE_HEARTBEAT);
    expect(heartbeat.leaseDurationSeconds).toBeGreaterThan(PATIENT_NODE_HEARTBEAT.leaseDurationSeconds);
    expect(10_000 / (heartbeat.leaseDurationSeconds / 4)).toBeLessThanOrEqual(MAX_LEASE_RENEWALS_PER_SECOND);
  });
});
