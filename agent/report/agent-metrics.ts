import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { DRIVER_PHASES, type DriverPhase } from './driver-state.ts';

/** How a build ended: compiled now, taken from the cache, or failed. */
export type BuildResult = 'built' | 'cached' | 'failed';
/** How a load ended: modules replaced, already loaded (srcversion fast path), or failed. */
export type LoadResult = 'loaded' | 'unchanged' | 'failed';

export interface AgentMetrics {
  observeBuild(seconds: number, result: BuildResult): void;
  observeLoad(seconds: number, result: LoadResult): void;
  setPhase(phase: DriverPhase): void;
  countFailure(reason: string): void;
  setDevices(count: number): void;
  /** The next-kernel preflight: one build for an installed, not running kernel. */
  observeNextKernelBuild(seconds: number, result: BuildResult): void;
  /** The next-kernel preflight's verdict per kernel (1 ready, 0 failed); kernels not listed are dropped. */
  setNextKernels(results: readonly { readonly kernel: string; readonly ready: boolean }[]): void;
}

/**
 * Prometheus metrics of one agent. Every series carries the driver name, so one dashboard can
 * show GPU and NIC agents side by side. The state is a gauge per phase (1 for the current one),
 * the usual encoding of an enum in Prometheus.
 */
export function createAgentMetrics(registry: Registry, driver: string): AgentMetrics {
  const build = new Histogram({
    name: 'driver_rollout_agent_build_duration_seconds',
    help: 'Time to produce the driver modules for the running kernel (compile or cache hit).',
    labelNames: ['driver', 'result'] as const,
    buckets: [0.1, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800],
    registers: [registry],
  });
  const load = new Histogram({
    name: 'driver_rollout_agent_load_duration_seconds',
    help: 'Time to unload the old driver modules and load the new ones.',
    labelNames: ['driver', 'result'] as const,
    buckets: [0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  });
  const state = new Gauge({
    name: 'driver_rollout_agent_state',
    help: 'Current state of the agent: 1 for the current phase, 0 for the others.',
    labelNames: ['driver', 'phase'] as const,
    registers: [registry],
  });
  const failures = new Counter({
    name: 'driver_rollout_agent_failures_total',
    help: 'Failed attempts to build, load or verify the driver, by reason.',
    labelNames: ['driver', 'reason'] as const,
    registers: [registry],
  });
  const devices = new Gauge({
    name: 'driver_rollout_agent_devices',
    help: 'Devices on this node that the driver serves.',
    labelNames: ['driver'] as const,
    registers: [registry],
  });
  const nextKernelBuild = new Histogram({
    name: 'driver_rollout_agent_next_kernel_build_duration_seconds',
    help: 'Time to build the driver (in the background, low priority) for an installed kernel that is not running.',
    labelNames: ['driver', 'result'] as const,
    buckets: [0.1, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600],
    registers: [registry],
  });
  const nextKernelReady = new Gauge({
    name: 'driver_rollout_agent_next_kernel_ready',
    help: 'Whether the driver builds for an installed kernel that is not running (1) or not (0), by kernel release.',
    labelNames: ['driver', 'kernel'] as const,
    registers: [registry],
  });
  return {
    observeNextKernelBuild: (seconds, result) => { nextKernelBuild.observe({ driver, result }, seconds); },
    setNextKernels: (results) => {
      nextKernelReady.reset();
      for (const r of results) nextKernelReady.set({ driver, kernel: r.kernel }, r.ready ? 1 : 0);
    },
    observeBuild: (seconds, result) => { build.observe({ driver, result }, seconds); },
    observeLoad: (seconds, result) => { load.observe({ driver, result }, seconds); },
    setPhase: (phase) => {
      for (const p of DRIVER_PHASES) state.set({ driver, phase: p }, p === phase ? 1 : 0);
    },
    countFailure: (reason) => { failures.inc({ driver, reason }); },
    setDevices: (count) => { devices.set({ driver }, count); },
  };
}
