/**
 * How the test bed's KWOK nodes show they are alive, and how long the node lifecycle controller
 * waits for that before it sets a node's Ready to Unknown (NotReady).
 */
export interface NodeHeartbeat {
  /** KWOK's `--node-lease-duration-seconds`; KWOK renews each node's Lease every quarter of it, as a kubelet does. */
  readonly leaseDurationSeconds: number;
  /** kube-controller-manager's `--node-monitor-grace-period`, in seconds: a node's Lease unrenewed this long turns it NotReady. */
  readonly monitorGracePeriodSeconds: number;
}

/** A kubelet's and kube-controller-manager's defaults: a 40 s Lease renewed every 10 s, NotReady after 50 s without a renewal. */
export const DEFAULT_NODE_HEARTBEAT: NodeHeartbeat = { leaseDurationSeconds: 40, monitorGracePeriodSeconds: 50 };

/**
 * A heartbeat that outlasts a busy shared machine: a 240 s Lease renewed every 60 s, NotReady
 * after 300 s without a renewal. With the defaults, 10 to 30 of 200 KWOK nodes went NotReady at
 * a load of 30 to 40 on 2 cores before any controller of ours ran (issue 33): KWOK and the API
 * server fell more than 40 s behind on renewals. For runs that measure something other than
 * NotReady detection (the bench), where a NotReady node voids the figures.
 */
export const PATIENT_NODE_HEARTBEAT: NodeHeartbeat = { leaseDurationSeconds: 240, monitorGracePeriodSeconds: 300 };

/**
 * Lease renewals per second that KWOK and the API server keep up with on a 2-core test machine
 * while a rollout runs on it: 1,000 nodes at the defaults renew 100 a second, and every 1,000-node
 * bench case ran to its end so; at 5,000 nodes (500 a second) the renewals fell behind and
 * thousands of nodes went NotReady (issue 33).
 */
export const MAX_LEASE_RENEWALS_PER_SECOND = 100;

/**
 * The heartbeat for a test bed of `nodes` KWOK nodes: `least` (default: the defaults) up to the
 * node count whose renewals reach MAX_LEASE_RENEWALS_PER_SECOND; above it a Lease long enough to
 * stay at that rate, and the grace period the same multiple of it as the defaults' (5/4): a node
 * turns NotReady after the same number of renewal intervals without one (5), each longer.
 */
export function nodeHeartbeatFor(nodes: number, least: NodeHeartbeat = DEFAULT_NODE_HEARTBEAT): NodeHeartbeat {
  const lease = Math.ceil((4 * nodes) / MAX_LEASE_RENEWALS_PER_SECOND);
  if (lease <= least.leaseDurationSeconds) return least;
  return { leaseDurationSeconds: lease, monitorGracePeriodSeconds: Math.ceil((lease * DEFAULT_NODE_HEARTBEAT.monitorGracePeriodSeconds) / DEFAULT_NODE_HEARTBEAT.leaseDurationSeconds) };
}

/** KWOK's own default for `nodeLeaseParallelism`: Leases renewed at once. */
export const KWOK_DEFAULT_LEASE_WORKERS = 4;

/**
 * Lease renewals one of KWOK's lease workers keeps up with on a 2-core test machine under a
 * rollout: at 5,000 nodes (load 7 to 8) KWOK's 4 default workers renewed about 21 Leases a
 * second, a 240 s Lease went unrenewed for up to 455 s, and over a fifth of the nodes went NotReady
 * (issue 33).
 */
export const LEASE_RENEWALS_PER_WORKER_PER_SECOND = 5;

/**
 * KWOK's `nodeLeaseParallelism` for `nodes` nodes with `heartbeat`: enough workers for a renewal
 * of every Lease each quarter of its duration at LEASE_RENEWALS_PER_WORKER_PER_SECOND, never
 * fewer than KWOK's default.
 */
export function kwokLeaseWorkers(nodes: number, heartbeat: NodeHeartbeat): number {
  const renewalsPerSecond = nodes / (heartbeat.leaseDurationSeconds / 4);
  return Math.max(KWOK_DEFAULT_LEASE_WORKERS, Math.ceil(renewalsPerSecond / LEASE_RENEWALS_PER_WORKER_PER_SECOND));
}
