import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { driverKeys } from '../shared/keys.ts';
import { loadKubeConfig } from '../shared/kube/load-kube-config.ts';
import type { LoadedModule } from '../shared/kmod/read-loaded-module.ts';
import type { Logger } from '../shared/logger.ts';
import { acquireNodeLock } from './acquire-node-lock.ts';
import { buildDriver } from './build/build-driver.ts';
import type { BuiltDriver } from './build/built-driver.ts';
import type { AgentConfig } from './config.ts';
import { detectNode } from './detect/detect-node.ts';
import { systemHostInfo, type HostInfoPort } from './detect/host-info.ts';
import { decideReload } from './kernel/decide-reload.ts';
import { DriverInUseError, DriverVerificationError } from './kernel/kernel-errors.ts';
import type { KernelPort, ModuleTree } from './kernel/kernel-port.ts';
import { planUnload } from './kernel/plan-unload.ts';
import { createRealKernel } from './kernel/real-kernel.ts';
import { reloadDriver } from './kernel/reload-driver.ts';
import { SimulatedKernel } from './kernel/simulated-kernel.ts';
import { createAgentMetrics } from './report/agent-metrics.ts';
import { createNodeEventRecorder } from './report/node-events.ts';
import { createNodeLabelWriter } from './report/node-labels.ts';
import { createPodConditionWriter } from './report/pod-condition.ts';
import { createStateReporter, type StateReporter } from './report/state-reporter.ts';
import { startStatusServer, type StatusServer } from './report/status-server.ts';
import { runAgent, type AgentSteps } from './run-agent.ts';

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

  const steps = createSteps(config, kernel, hostInfo, log);
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
  const kernel = new SimulatedKernel({ sysModuleDir, runningKernelVersion, loadDurationMs: () => config.simulated.loadMs });
  for (const [module, errnoText] of Object.entries(config.simulated.initFailures)) kernel.failInit(module, errnoText);
  log.warn({ runningKernelVersion, sysModuleDir }, 'using the SIMULATED kernel: no real module is loaded');
  return kernel;
}

/** The flow's steps over detection, buildDriver and reloadDriver. */
function createSteps(config: AgentConfig, kernel: KernelPort, hostInfo: HostInfoPort, log: Logger): AgentSteps {
  const tree = (built: BuiltDriver): ModuleTree => ({ root: config.moduleRoot, kernelVersion: built.kernelVersion, configDir: config.modprobeConfigDir });
  const toLoad = (built: BuiltDriver) => (config.modules.length > 0 ? config.modules : built.modules.map((m) => m.name));
  let lastBuilt: BuiltDriver | undefined;

  return {
    detect: () =>
      detectNode({ sysfsRoot: config.sysfsRoot, selector: config.deviceSelector, hostInfo, kernelReleaseOverride: config.kernelVersion }),

    async build(detection, signal) {
      lastBuilt = await buildDriver({
        driver: config.driver,
        version: config.driverVersion,
        kernelVersion: detection.host.kernelRelease,
        source: config.source,
        cacheDir: config.cacheDir,
        makeVariables: config.makeVariables,
        signing: config.signing,
        ...(config.headersDirs === undefined
          ? {}
          : { headersDirs: config.headersDirs.map((d) => d.replaceAll('{kernel}', detection.host.kernelRelease)) }),
        logger: log,
        signal,
      });
      return lastBuilt;
    },

    async load(built) {
      const result = await reloadDriver(kernel, built, {
        tree: tree(built),
        parameters: config.moduleParameters,
        loadModules: toLoad(built),
        competingModules: config.blacklist,
        logger: log,
      });
      const summary =
        result.outcome === 'fast-path'
          ? `already loaded with the built srcversions: ${result.reason}`
          : `${result.outcome}: unloaded [${result.unloaded.join(', ')}], loaded [${result.loadOrder.map((s) => s.module).join(', ')}] (${result.reason})`;
      return { changed: result.outcome !== 'fast-path', summary };
    },

    async verify(built) {
      const loaded = await readLoaded(kernel, built.modules.map((m) => m.name));
      const decision = decideReload(built.modules, toLoad(built), loaded, config.moduleParameters);
      if (decision.kind !== 'fast-path') {
        throw new DriverVerificationError(`the driver is not loaded as built: ${decision.reason}`, { reason: decision.reason });
      }
      return { version: built.version, modules: [...loaded.keys()] };
    },

    async unload() {
      if (lastBuilt === undefined) return;
      const loaded = await readLoaded(kernel, lastBuilt.modules.map((m) => m.name));
      const plan = planUnload([...loaded.values()]);
      if (plan.kind === 'in-use') throw new DriverInUseError(config.driver, plan.inUse);
      for (const module of plan.order) await kernel.unload(module);
    },
  };
}

async function readLoaded(kernel: KernelPort, names: readonly string[]): Promise<Map<string, LoadedModule>> {
  const loaded = new Map<string, LoadedModule>();
  for (const name of names) {
    const module = await kernel.readModule(name);
    if (module !== undefined) loaded.set(module.name, module);
  }
  return loaded;
}
