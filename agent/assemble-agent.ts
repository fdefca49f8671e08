import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { backoffDelay, type BackoffPolicy } from '../shared/backoff.ts';
import { ConfigError, toError } from '../shared/errors.ts';
import { driverKeys, type DriverKeys } from '../shared/keys.ts';
import { loadKubeConfig } from '../shared/kube/load-kube-config.ts';
import type { Logger } from '../shared/logger.ts';
import { acquireNodeLock } from './acquire-node-lock.ts';
import type { AgentConfig } from './config/agent-config.ts';
import { systemHostInfo, type HostInfoPort } from './detect/host-info.ts';
import type { KernelPort } from './kernel/kernel-port.ts';
import { createRealKernel } from './kernel/real-kernel.ts';
import { createAgentMetrics } from './report/agent-metrics.ts';
import { createNodeEventRecorder } from './report/node-events.ts';
import { createNodeLabelWriter, createNodeMetadataWriter } from './report/node-labels.ts';
import { createPodConditionWriter } from './report/pod-condition.ts';
import { createStateReporter, type StateReporter } from './report/state-reporter.ts';
import { startStatusServer, type StatusServer } from './report/status-server.ts';
import { buildDriverFor, createAgentSteps, judgeNextKernelSignatures } from './create-agent-steps.ts';
import { renderSignatureVerdict, type SignatureVerdict } from '../shared/module-signature-verdict.ts';
import { renderKernelSignaturePolicy, type KernelSignaturePolicy } from '../shared/kernel-signature-policy.ts';
import { readKernelSignaturePolicy } from './kernel/read-signature-policy.ts';
import { apiErrorMessage, apiStatusCode } from '../shared/kube/api-error.ts';
import { createLatestWinsWriter } from './report/latest-wins-writer.ts';
import { defaultHeadersDirs } from './build/find-kernel-headers.ts';
import { findInstalledKernels } from './build/find-installed-kernels.ts';
import { runNextKernelPreflight, type NextKernelPreflightDeps } from './preflight/run-next-kernel-preflight.ts';
import type { AgentMetrics } from './report/agent-metrics.ts';
import { runAgent } from './run-agent.ts';
import { hostBlacklistFile, removeHostBlacklist } from './kernel/host-blacklist.ts';
import { isDriverUninstalled } from './is-driver-uninstalled.ts';
import { NO_SIMULATED_KERNEL } from './no-simulated-kernel.ts';
import type { DriverRoot } from './root/driver-root.ts';
import { driverRootOf } from './root/driver-root-of.ts';

/**
 * Builds the kernel adapter for `--kernel simulated`. Production has none: the simulated kernel
 * is a test double (test/doubles/), wired only by the test entry point
 * (test/doubles/simulated-agent-main.ts), so the image cannot report a load that never happened.
 */
export type SimulatedKernelFactory = (config: AgentConfig, hostInfo: HostInfoPort, log: Logger) => Promise<KernelPort>;

/** Replacements for the outside world: tests inject these; main.ts uses none. */
export interface AgentOverrides {
  readonly kubeConfig?: KubeConfig;
  readonly hostInfo?: HostInfoPort;
  readonly kernel?: KernelPort;
  readonly simulatedKernel?: SimulatedKernelFactory;
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

/** Retries of the pod condition, node labels and Events: from 0.5 s, doubling, up to 30 s. */
const REPORT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000 };

const VERIFY_INTERVAL_MS = 30_000;
/** SIGTERM must withdraw readiness within 1 s; this leaves room for the local steps. */
const STOP_FLUSH_MS = 800;

/** Wires config to ports, reporters and the flow. Starts the HTTP server (probes answer 503 until ready). */
export async function assembleAgent(config: AgentConfig, log: Logger, overrides: AgentOverrides = {}): Promise<AssembledAgent> {
  const hostInfo = overrides.hostInfo ?? systemHostInfo();
  const kernel = overrides.kernel ?? (await createKernel(config, hostInfo, log, overrides.simulatedKernel));
  const kubeConfig = overrides.kubeConfig ?? loadKubeConfig(config.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
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
    retryDelayMs: (attempt) => backoffDelay(attempt, REPORT_BACKOFF, Math.random),
    sinks: {
      writePodCondition: createPodConditionWriter(core, { name: config.podName, namespace: config.podNamespace }, keys.driverReadyCondition, now),
      writeNodeMetadata: createNodeMetadataWriter(core, config.nodeName),
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

  const writeNodeMetadata = createNodeMetadataWriter(core, config.nodeName);
  // One node annotation written in the background, retried with the labels' backoff; the latest value wins.
  const annotationWriter = <T>(key: string, render: (value: T) => string, what: string) =>
    createLatestWinsWriter<T>((value) => writeNodeMetadata({ labels: {}, annotations: { [key]: render(value) } }), {
      retryDelayMs: (attempt) => backoffDelay(attempt, REPORT_BACKOFF, Math.random),
      onError: (error, attempt) => { log.warn({ attempt, status: apiStatusCode(error), why: apiErrorMessage(error) }, `cannot write ${what}; retrying`); },
    });
  const verdictWriter = annotationWriter<SignatureVerdict>(keys.moduleSignatures, renderSignatureVerdict, 'the module-signature verdict');
  const kernelPolicyWriter = annotationWriter<KernelSignaturePolicy>(keys.kernelSignaturePolicy, renderKernelSignaturePolicy, "the kernel's signature policy");
  const root = driverRootOf(config, log);
  const steps = createAgentSteps(config, kernel, hostInfo, log, { root, publishVerdict: (verdict) => { verdictWriter.set(verdict); } });
  const preflight = config.nextKernelPreflight ? createPreflight(config, core, keys, metrics, log) : undefined;
  return {
    statusServer,
    reporter,
    kernel,
    async run(signal) {
      try {
        // The node's own signature facts, before anything is built or loaded: the coordinator judges the next build's signer by them.
        await readKernelSignaturePolicy(hostInfo, { procDir: config.procDir }).then(
          (policy) => { kernelPolicyWriter.set(policy); },
          (error: unknown) => { log.warn({ err: toError(error) }, "cannot read the kernel's module signature policy; not published"); },
        );
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
            preflight,
            onStop:
              config.hostBlacklistDir === undefined && root === undefined
                ? undefined
                : releaseOnUninstall(config, root, core, kubeConfig.makeApiClient(AppsV1Api), log),
          },
          signal,
        );
      } finally {
        loopRunning = false;
        verdictWriter.stop();
        kernelPolicyWriter.stop();
      }
    },
    close: () => statusServer.close(),
  };
}

/**
 * On stop: what the driver leaves on the host (its blacklist file, its published root) goes when
 * the driver is uninstalled, and stays on a restart.
 */
function releaseOnUninstall(config: AgentConfig, root: DriverRoot | undefined, core: CoreV1Api, apps: AppsV1Api, log: Logger) {
  return async () => {
    if (!(await isDriverUninstalled(core, apps, { name: config.podName, namespace: config.podNamespace }))) return;
    if (config.hostBlacklistDir !== undefined) {
      await removeHostBlacklist(config.hostBlacklistDir, config.driver);
      log.info({ file: hostBlacklistFile(config.hostBlacklistDir, config.driver) }, 'driver uninstalled: removed its host blacklist file');
    }
    if (root !== undefined) {
      await root.release();
      log.info({ path: config.driverRootPath }, 'driver uninstalled: unpublished its driver root');
    }
  };
}

/** The next-kernel preflight over the agent's own build, a label writer and an Event recorder of its own. */
function createPreflight(config: AgentConfig, core: CoreV1Api, keys: DriverKeys, metrics: AgentMetrics, log: Logger) {
  const sinks = {
    writeLabels: createNodeLabelWriter(core, config.nodeName),
    recordEvent: createNodeEventRecorder(core, { nodeName: config.nodeName, podName: config.podName }, () => new Date()),
  };
  const deps = nextKernelPreflightDeps(config, keys, sinks, metrics, log.child({ task: 'next-kernel-preflight' }));
  return (runningKernel: string, signal: AbortSignal) => runNextKernelPreflight({ ...deps, intervalMs: config.nextKernelIntervalMs }, runningKernel, signal);
}

/**
 * What the next-kernel preflight runs on, as the agent wires it: the kernels with installed
 * headers, the agent's own build for each (the cache key it looks up after a reboot) and its
 * signature judge under the running kernel's policy; `sinks` take its labels and Events.
 */
export function nextKernelPreflightDeps(
  config: AgentConfig,
  keys: DriverKeys,
  sinks: Pick<NextKernelPreflightDeps, 'writeLabels' | 'recordEvent'>,
  metrics: NextKernelPreflightDeps['metrics'],
  log: Logger,
): NextKernelPreflightDeps {
  return {
    keys,
    context: { driver: config.driver, version: config.driverVersion },
    findKernels: () => findInstalledKernels(config.headersDirs ?? defaultHeadersDirs('{kernel}')),
    build: (kernel, buildSignal) => buildDriverFor(config, kernel, { log, signal: buildSignal, background: true }),
    judgeSignatures: (built) => judgeNextKernelSignatures(config, built),
    ...sinks,
    metrics,
    log,
  };
}

async function createKernel(
  config: AgentConfig,
  hostInfo: HostInfoPort,
  log: Logger,
  simulatedKernel: SimulatedKernelFactory | undefined,
): Promise<KernelPort> {
  if (config.kernelAdapter === 'real') return createRealKernel({ sysModuleDir: join(config.sysfsRoot, 'module'), logger: log });
  if (simulatedKernel === undefined) {
    throw new ConfigError('agent configuration', [NO_SIMULATED_KERNEL]);
  }
  return await simulatedKernel(config, hostInfo, log);
}
