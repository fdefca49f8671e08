import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { driverKeys } from '../shared/keys.ts';
import { loadKubeConfig } from '../shared/kube/load-kube-config.ts';
import type { Logger } from '../shared/logger.ts';
import { acquireNodeLock } from './acquire-node-lock.ts';
import type { AgentConfig } from './config.ts';
import { systemHostInfo, type HostInfoPort } from './detect/host-info.ts';
import type { KernelPort } from './kernel/kernel-port.ts';
import { createRealKernel } from './kernel/real-kernel.ts';
import { SimulatedKernel } from './kernel/simulated-kernel.ts';
import { createAgentMetrics } from './report/agent-metrics.ts';
import { createNodeEventRecorder } from './report/node-events.ts';
import { createNodeLabelWriter } from './report/node-labels.ts';
import { createPodConditionWriter } from './report/pod-condition.ts';
import { createStateReporter, type StateReporter } from './report/state-reporter.ts';
import { startStatusServer, type StatusServer } from './report/status-server.ts';
import { createAgentSteps } from './create-agent-steps.ts';
import { runAgent } from './run-agent.ts';

/** Replacements for the outside world: tests inject these; main.ts uses none. */
export interface AgentOverrides {
  readonly kubeConfig?: KubeConfig;
  readonly hostInfo?: HostInfoPort;
  readonly kernel?: KernelPort;
}

export interface AssembledAgent {
  readonly statusServer: StatusServer;
  readonly reporter: StateReporter;
  readonly kernel: KernelPort;
  /** Runs until `signal` aborts (SIGTERM); see runAgent. */
  run(signal: AbortSignal): Promise<void>;
  /** Closes the HTTP server; call after `run` returned. */
  close(): Promise<void>;
}

const VERIFY_INTERVAL_MS = 30_000;
/** SIGTERM must withdraw readiness within 1 s; this leaves room for the local steps. */
const STOP_FLUSH_MS = 800;

/** Wires config to ports, reporters and the flow. Starts the HTTP server (probes answer 503 until ready). */
export async function assembleAgent(config: AgentConfig, log: Logger, overrides: AgentOverrides = {}): Promise<AssembledAgent> {
  const hostInfo = overrides.hostInfo ?? systemHostInfo();
  const kernel = overrides.kernel ?? (await createKernel(config, hostInfo, log));
  const core = (overrides.kubeConfig ?? loadKubeConfig(config.kubeconfig)).makeApiClient(CoreV1Api);
  const keys = driverKeys(config.driver, config.keyDomain);
  const now = () => new Date();

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const metrics = createAgentMetrics(registry, config.driver);
  const reporter = createStateReporter({
    driver: config.driver,
    keys,
    readyFilePath: config.readyFile,
    metrics,
    log,
    now,
    retryDelayMs: (attempt) => Math.min(30_000, 500 * 2 ** attempt),
    sinks: {
      writePodCondition: createPodConditionWriter(core, { name: config.podName, namespace: config.podNamespace }, keys.driverReadyCondition, now),
      writeNodeLabels: createNodeLabelWriter(core, config.nodeName),
      recordNodeEvent: createNodeEventRecorder(core, { nodeName: config.nodeName, podName: config.podName }, now),
    },
  });
  let loopRunning = true;
  const statusServer = await startStatusServer({
    port: config.httpPort,
    host: config.httpHost,
    readiness: () => reporter.readiness(),
    healthy: () => loopRunning,
    registry,
  });
  log.info({ port: statusServer.port }, 'serving /healthz, /readyz and /metrics');

  const steps = createAgentSteps(config, kernel, hostInfo, log);
  return {
    statusServer,
    reporter,
    kernel,
    async run(signal) {
      try {
        await runAgent(
          {
            driver: config.driver,
            steps,
            reporter,
            metrics,
            log,
            lock: (lockSignal, events) =>
              acquireNodeLock({ path: config.lockPath, signal: lockSignal, onWaiting: events.onWaiting, onCompromised: events.onLost }),
            retry: config.retry,
            verifyIntervalMs: VERIFY_INTERVAL_MS,
            unloadOnStop: config.unloadOnStop,
            stopFlushMs: STOP_FLUSH_MS,
            random: Math.random,
          },
          signal,
        );
      } finally {
        loopRunning = false;
      }
    },
    close: () => statusServer.close(),
  };
}

async function createKernel(config: AgentConfig, hostInfo: HostInfoPort, log: Logger): Promise<KernelPort> {
  const sysModuleDir = join(config.sysfsRoot, 'module');
  if (config.kernelAdapter === 'real') return createRealKernel({ sysModuleDir, logger: log });
  const runningKernelVersion =
    config.simulated.kernelRelease ?? config.kernelVersion ?? (await hostInfo.readHostInfo()).kernelRelease;
  // The kernel's memory lives beside its /sys/module tree, so it outlives this agent like a real one.
  const stateFile = join(config.sysfsRoot, '.simulated-kernel.json');
  const kernel = new SimulatedKernel({ sysModuleDir, runningKernelVersion, loadDurationMs: () => config.simulated.loadMs, stateFile });
  for (const [module, errnoText] of Object.entries(config.simulated.initFailures)) kernel.failInit(module, errnoText);
  log.warn({ runningKernelVersion, sysModuleDir }, 'using the SIMULATED kernel: no real module is loaded');
  return kernel;
}
