import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { UpgradeState } from '../../shared/keys.ts';
import { CANARY_PHASES, type CanaryPhase } from '../plan/action.ts';

/** How many nodes of one DriverRollout are where, in the GPU Operator's terms. */
export interface RolloutNodeCounts {
  /** cordon-required through uncordon-required. */
  readonly inProgress: number;
  readonly done: number;
  readonly failed: number;
  /** Nodes that may start an upgrade now (free slots, bounded by the nodes waiting). */
  readonly available: number;
  /** upgrade-required: waiting for a slot. */
  readonly pending: number;
}

export interface RolloutLabels {
  readonly namespace: string;
  readonly rollout: string;
  readonly driver: string;
}

const ROLLOUT_LABELS = ['namespace', 'rollout', 'driver'] as const;

/**
 * The GPU Operator's own upgrade gauges, exactly as NVIDIA/gpu-operator registers them
 * (`controllers/operator_metrics.go`: namespace `gpu_operator`, no labels, one value for the
 * cluster). Kept so that dashboards and alerts written for the GPU Operator keep working: each is
 * the sum over the DriverRollouts of the GPU driver (driverName `gpu`). NVIDIA's docs spell the
 * first one `gpu_operator_auto_upgrade_enabled`; the code registers the name below.
 */
export const NVIDIA_GPU_OPERATOR_GAUGES = {
  autoUpgrade: 'gpu_operator_driver_auto_upgrade_enabled',
  inProgress: 'gpu_operator_nodes_upgrades_in_progress',
  done: 'gpu_operator_nodes_upgrades_done',
  failed: 'gpu_operator_nodes_upgrades_failed',
  available: 'gpu_operator_nodes_upgrades_available',
  pending: 'gpu_operator_nodes_upgrades_pending',
} as const;

/** The driver name whose rollouts feed NVIDIA_GPU_OPERATOR_GAUGES (the GPU Operator's driver). */
export const NVIDIA_GPU_DRIVER_NAME = 'gpu';

interface RolloutSample {
  readonly labels: RolloutLabels;
  readonly counts: RolloutNodeCounts;
  readonly autoUpgrade: boolean;
}

/**
 * The coordinator's Prometheus metrics: the GPU Operator's upgrade gauges
 * (`gpu_operator_nodes_upgrades_*`, `gpu_operator_driver_auto_upgrade_enabled`) under our
 * prefix with one series per DriverRollout, the same gauges under NVIDIA's own unlabelled names
 * (NVIDIA_GPU_OPERATOR_GAUGES), whether a rollout is halted, plus histograms of how long a node's
 * upgrade takes and how long nodes spend in each state.
 */
export class CoordinatorMetrics {
  readonly registry = new Registry();
  private readonly gauges: Readonly<Record<keyof RolloutNodeCounts, Gauge<(typeof ROLLOUT_LABELS)[number]>>>;
  private readonly autoUpgrade: Gauge<(typeof ROLLOUT_LABELS)[number]>;
  private readonly halted: Gauge<(typeof ROLLOUT_LABELS)[number]>;
  private readonly canaryPhase: Gauge<(typeof ROLLOUT_LABELS)[number] | 'phase'>;
  private readonly canaryNodes: Gauge<(typeof ROLLOUT_LABELS)[number]>;
  private readonly nvidia: Readonly<Record<keyof typeof NVIDIA_GPU_OPERATOR_GAUGES, Gauge>>;
  private readonly samples = new Map<string, RolloutSample>();
  private readonly leader: Gauge;
  private readonly upgradeSeconds: Histogram<'driver'>;
  private readonly stateSeconds: Histogram<'driver' | 'state'>;
  private readonly reconcileSeconds: Histogram;
  private readonly eventsQueued: Gauge;
  private readonly eventsDropped: Counter<'reason'>;
  private readonly cordonConflicts: Counter<'driver'>;

  constructor() {
    const gauge = (name: string, help: string): Gauge<(typeof ROLLOUT_LABELS)[number]> =>
      new Gauge({ name, help, labelNames: ROLLOUT_LABELS, registers: [this.registry] });
    this.gauges = {
      inProgress: gauge('driver_rollout_nodes_upgrades_in_progress', 'Nodes whose driver upgrade is under way (cordon-required to uncordon-required).'),
      done: gauge('driver_rollout_nodes_upgrades_done', 'Nodes whose driver pod is current and that are back in service (upgrade-done).'),
      failed: gauge('driver_rollout_nodes_upgrades_failed', 'Nodes whose driver upgrade failed (upgrade-failed).'),
      available: gauge('driver_rollout_nodes_upgrades_available', 'Nodes that may start an upgrade now within the limits.'),
      pending: gauge('driver_rollout_nodes_upgrades_pending', 'Nodes waiting to start an upgrade (upgrade-required).'),
    };
    this.autoUpgrade = gauge('driver_rollout_driver_auto_upgrade_enabled', '1 when upgradePolicy.autoUpgrade is true, else 0.');
    this.halted = gauge('driver_rollout_halted', '1 while the rollout is halted (maxFailedNodes nodes in upgrade-failed), else 0.');
    this.canaryPhase = new Gauge({
      name: 'driver_rollout_canary_phase',
      help: 'Where the canary of the newest driver revision stands: 1 for its phase (Canary, WaitingForApproval, Soaking, Rolling, CanaryFailed), 0 for the others; no series while no canary holds a revision.',
      labelNames: [...ROLLOUT_LABELS, 'phase'],
      registers: [this.registry],
    });
    this.canaryNodes = gauge('driver_rollout_canary_nodes', 'Canary nodes of the newest driver revision; no series while no canary holds a revision.');
    const nvidiaGauge = (name: string, help: string): Gauge => new Gauge({ name, help, registers: [this.registry] });
    this.nvidia = {
      autoUpgrade: nvidiaGauge(NVIDIA_GPU_OPERATOR_GAUGES.autoUpgrade, '1 if driver auto upgrade is enabled 0 if not (GPU Operator name; 1 when any gpu DriverRollout enables it).'),
      inProgress: nvidiaGauge(NVIDIA_GPU_OPERATOR_GAUGES.inProgress, 'Total number of nodes on which the gpu operator pods are being upgraded (GPU Operator name; sum over gpu DriverRollouts).'),
      done: nvidiaGauge(NVIDIA_GPU_OPERATOR_GAUGES.done, 'Total number of nodes on which the gpu operator pods are successfully upgraded (GPU Operator name; sum over gpu DriverRollouts).'),
      failed: nvidiaGauge(NVIDIA_GPU_OPERATOR_GAUGES.failed, 'Total number of nodes on which the gpu operator pod upgrades have failed (GPU Operator name; sum over gpu DriverRollouts).'),
      available: nvidiaGauge(NVIDIA_GPU_OPERATOR_GAUGES.available, 'Total number of nodes on which the gpu operator pod upgrades can be done (GPU Operator name; sum over gpu DriverRollouts).'),
      pending: nvidiaGauge(NVIDIA_GPU_OPERATOR_GAUGES.pending, 'Total number of nodes on which the gpu operator pod upgrades are pending (GPU Operator name; sum over gpu DriverRollouts).'),
    };
    this.leader = new Gauge({ name: 'driver_rollout_coordinator_is_leader', help: '1 while this replica holds the Lease.', registers: [this.registry] });
    this.upgradeSeconds = new Histogram({
      name: 'driver_rollout_node_upgrade_duration_seconds',
      help: 'Time from a node leaving upgrade-required to reaching upgrade-done.',
      labelNames: ['driver'],
      buckets: [10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200],
      registers: [this.registry],
    });
    this.stateSeconds = new Histogram({
      name: 'driver_rollout_node_state_duration_seconds',
      help: 'Time a node spent in one upgrade state before leaving it.',
      labelNames: ['driver', 'state'],
      buckets: [0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
      registers: [this.registry],
    });
    this.reconcileSeconds = new Histogram({
      name: 'driver_rollout_reconcile_duration_seconds',
      help: 'Time of one reconcile pass (snapshot, plan, execute) over every DriverRollout.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [this.registry],
    });
    this.eventsQueued = new Gauge({ name: 'driver_rollout_events_queued', help: 'Kubernetes Events raised and not yet sent (waiting or under way; see EventQueue).', registers: [this.registry] });
    this.eventsDropped = new Counter({
      name: 'driver_rollout_events_dropped_total',
      help: 'Kubernetes Events never sent: the queue was full (reason="full") or the coordinator stopped before they went out (reason="closed").',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    this.cordonConflicts = new Counter({
      name: 'driver_rollout_node_write_conflicts_total',
      help: 'Cordon and uncordon writes refused because a field they were made from (cordon, holders, a key written, readiness) changed since the Node was read (HTTP 422 from a failed JSON Patch test); each is tried again on the Node read afresh.',
      labelNames: ['driver'],
      registers: [this.registry],
    });
    collectDefaultMetrics({ register: this.registry });
  }

  setEventsQueued(count: number): void {
    this.eventsQueued.set(count);
  }

  countEventDropped(reason: 'full' | 'closed'): void {
    this.eventsDropped.inc({ reason });
  }

  countWriteConflict(driver: string): void {
    this.cordonConflicts.inc({ driver });
  }

  setRolloutCounts(labels: RolloutLabels, counts: RolloutNodeCounts, autoUpgrade: boolean, halted = false): void {
    for (const key of Object.keys(this.gauges) as (keyof RolloutNodeCounts)[]) {
      this.gauges[key].set({ ...labels }, counts[key]);
    }
    this.autoUpgrade.set({ ...labels }, autoUpgrade ? 1 : 0);
    this.halted.set({ ...labels }, halted ? 1 : 0);
    this.samples.set(sampleKey(labels), { labels, counts, autoUpgrade });
    this.updateNvidiaGauges();
  }

  /** The canary of a rollout's newest revision: its phase and node count; null drops the series. */
  setCanary(labels: RolloutLabels, canary: { readonly phase: CanaryPhase; readonly nodes: readonly string[] } | null): void {
    for (const phase of CANARY_PHASES) {
      if (canary === null) this.canaryPhase.remove({ ...labels, phase });
      else this.canaryPhase.set({ ...labels, phase }, canary.phase === phase ? 1 : 0);
    }
    if (canary === null) this.canaryNodes.remove({ ...labels });
    else this.canaryNodes.set({ ...labels }, canary.nodes.length);
  }

  /** Drops the series of a DriverRollout that no longer exists. */
  forgetRollout(labels: RolloutLabels): void {
    this.setCanary(labels, null);
    for (const g of [...Object.values(this.gauges), this.autoUpgrade, this.halted]) g.remove({ ...labels });
    this.samples.delete(sampleKey(labels));
    this.updateNvidiaGauges();
  }

  private updateNvidiaGauges(): void {
    const gpu = [...this.samples.values()].filter((s) => s.labels.driver === NVIDIA_GPU_DRIVER_NAME);
    for (const key of ['inProgress', 'done', 'failed', 'available', 'pending'] as const) {
      this.nvidia[key].set(gpu.reduce((sum, s) => sum + s.counts[key], 0));
    }
    this.nvidia.autoUpgrade.set(gpu.some((s) => s.autoUpgrade) ? 1 : 0);
  }

  observeStateLeft(driver: string, state: UpgradeState, seconds: number): void {
    if (seconds >= 0) this.stateSeconds.observe({ driver, state }, seconds);
  }

  observeUpgradeDone(driver: string, seconds: number): void {
    if (seconds >= 0) this.upgradeSeconds.observe({ driver }, seconds);
  }

  observeReconcile(seconds: number): void {
    this.reconcileSeconds.observe(seconds);
  }

  /**
   * On losing the Lease the replica drops its rollout series: a standby exports none, as before
   * it ever led. Kept, its last values would stand beside the new leader's for as long as the
   * process lives, and the chart's alerts (max over the replicas) would keep reading them.
   */
  setLeader(isLeader: boolean): void {
    this.leader.set(isLeader ? 1 : 0);
    if (!isLeader) for (const sample of [...this.samples.values()]) this.forgetRollout(sample.labels);
  }
}

function sampleKey(labels: RolloutLabels): string {
  return `${labels.namespace}/${labels.rollout}`;
}
