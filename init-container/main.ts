/**
 * driver-rollout init container: the safe driver load gate.
 *
 * Runs before the agent in every driver pod. With safe load on it marks its own Node with
 * `<domain>/<driver>-driver-upgrade.driver-wait-for-safe-load=true` and blocks until the upgrade
 * coordinator removes the mark (node cordoned and drained), then optionally waits until the
 * modules to be replaced have no users outside the kernel. Then the driver may load.
 *
 * Exit codes (the contract with the kubelet and with operators reading `kubectl describe pod`):
 *   0    safe to load (or safe load disabled)
 *   1    failed: node not found, access denied, node deleted, unexpected error
 *   2    bad configuration (every problem listed; nothing was changed)
 *   3    overall timeout (WAIT_TIMEOUT_SECONDS) while waiting for the annotation to clear
 *   4    pre-flight refused: modules still in use when the timeout (or SIGTERM) ended the wait
 *   130  SIGINT, 143 SIGTERM: stopped on request
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { readLoadedModule } from '../shared/kmod/read-loaded-module.ts';
import { usageText, wantsHelp } from '../shared/cli-help.ts';
import { ConfigError, toError } from '../shared/errors.ts';
import { loadKubeConfig } from '../shared/kube/load-kube-config.ts';
import { createLogger, type Logger } from '../shared/logger.ts';
import { systemClock } from './clock.ts';
import { initSettings, parseInitConfig, type InitConfig } from './config.ts';
import { ModulesInUseError, StopRequested } from './errors.ts';
import { EXIT_CODES as EXIT, SIGNAL_EXIT_CODES as SIGNAL_EXIT } from './exit-codes.ts';
import { createKubeNodeApi } from './kube-node-api.ts';
import { runSafeLoadGate } from './run-safe-load-gate.ts';


async function main(): Promise<number> {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(usageText({
      summary: 'driver-rollout init container: the safe driver load gate (waits until the coordinator has drained the node).',
      command: 'node init-container/main.ts [--flag value ...]',
      settings: initSettings(),
      exitCodes: '0 safe to load, 1 failed, 2 bad configuration, 3 timeout, 4 modules in use, 130/143 stopped',
      readme: 'init-container/README.md',
    }));
    return EXIT.ok;
  }
  let config: InitConfig;
  try {
    config = parseInitConfig(process.argv.slice(2), process.env);
  } catch (thrown) {
    const logger = createLogger('init-container');
    if (thrown instanceof ConfigError) {
      logger.error({ problems: thrown.problems }, thrown.message);
      return EXIT.config;
    }
    throw thrown;
  }
  const logger = createLogger('init-container', config.logLevel);
  if (!config.safeLoadEnabled) {
    if (config.preflightModules.length > 0) logger.warn({ modules: config.preflightModules }, 'pre-flight skipped: it runs only with safe load');
    logger.info('safe load disabled: the driver may load now');
    return EXIT.ok;
  }

  let kubeConfig: KubeConfig;
  try {
    kubeConfig = loadKubeConfig(config.kubeconfig);
  } catch (thrown) {
    // A kubeconfig that exists but does not parse is a configuration problem too.
    const problem = { path: config.kubeconfig === undefined ? 'in-cluster credentials' : 'KUBECONFIG', message: toError(thrown).message };
    logger.error({ problems: [problem] }, new ConfigError('init-container configuration', [problem]).message);
    return EXIT.config;
  }

  const stop = new AbortController();
  for (const name of ['SIGTERM', 'SIGINT'] as const) {
    process.once(name, () => {
      stop.abort(new StopRequested('signal', `received ${name}`, { signal: name, exitCode: SIGNAL_EXIT[name] }));
    });
  }
  const signals = [stop.signal];
  if (config.waitTimeoutSeconds > 0) {
    const timeout = new AbortController();
    const seconds = config.waitTimeoutSeconds;
    setTimeout(() => {
      timeout.abort(new StopRequested('timeout', `timed out after ${seconds} s (WAIT_TIMEOUT_SECONDS)`, { timeoutSeconds: seconds }));
    }, seconds * 1000).unref();
    signals.push(timeout.signal);
  }
  const signal = AbortSignal.any(signals);

  logger.info(
    { node: config.nodeName, annotation: config.annotationKey, waitTimeoutSeconds: config.waitTimeoutSeconds, preflightModules: config.preflightModules },
    'safe load enabled: marking the node and waiting for the upgrade coordinator',
  );
  try {
    const result = await runSafeLoadGate(config, {
      api: createKubeNodeApi(kubeConfig),
      readModule: (name) => readLoadedModule(config.sysModuleRoot, name),
      signal,
      clock: systemClock,
      logger,
    });
    logger.info({ node: config.nodeName, ...result }, 'safe to load the driver');
    return EXIT.ok;
  } catch (thrown) {
    return reportFailure(thrown, signal, logger);
  }
}

function reportFailure(thrown: unknown, signal: AbortSignal, logger: Logger): number {
  const error = toError(thrown);
  const stopped: unknown = signal.aborted ? signal.reason : undefined;
  logger.error({ err: error }, error.message);
  if (stopped instanceof StopRequested && stopped.kind === 'signal') return Number(stopped.fields.exitCode);
  if (error instanceof ModulesInUseError) return EXIT.modulesInUse;
  if (stopped instanceof StopRequested) return EXIT.timeout;
  return EXIT.failed;
}

main().then(
  (code) => {
    process.exit(code);
  },
  (thrown: unknown) => {
    createLogger('init-container').fatal({ err: toError(thrown) }, 'unexpected failure');
    process.exit(EXIT.failed);
  },
);
