import { usageText, wantsHelp } from '../shared/cli-help.ts';
import { ConfigError, toError } from '../shared/errors.ts';
import { loadKubeConfig } from '../shared/kube/load-kube-config.ts';
import { createLogger } from '../shared/logger.ts';
import { coordinatorSettings, parseCoordinatorConfig } from './config.ts';
import { planUpgrades } from './plan/plan-upgrades.ts';
import { runCoordinator } from './run-coordinator.ts';

/**
 * `node coordinator/main.ts [--namespace a,b] [--lease-namespace ns] ...` (see config.ts).
 * SIGTERM/SIGINT stop it gracefully: the reconcile pass in flight finishes, the Lease is
 * released so the standby takes over at once. SIGKILL loses nothing either: every bit of
 * progress lives on the API objects.
 */
async function main(): Promise<number> {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(usageText({
      summary: 'driver-rollout coordinator: the leader-elected controller that moves nodes through the driver upgrade states.',
      command: 'node coordinator/main.ts [--flag value ...]',
      settings: coordinatorSettings(),
      exitCodes: '0 stopped on request, 1 fatal error, 2 bad configuration',
      readme: 'coordinator/README.md',
    }));
    return 0;
  }
  let config;
  try {
    config = parseCoordinatorConfig(process.argv.slice(2), process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const logger = createLogger('coordinator', config.logLevel);
  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      logger.info({ signal: sig }, 'stopping');
      stop.abort();
    });
  }
  try {
    const kc = loadKubeConfig(config.kubeconfig);
    const handle = await runCoordinator(config, { kc, logger, plan: planUpgrades }, stop.signal);
    await handle.done;
    logger.info('stopped');
    return 0;
  } catch (error) {
    logger.fatal({ err: toError(error) }, 'coordinator failed');
    return 1;
  }
}

process.exitCode = await main();
// Informer sockets or timers left by a failure must not keep a stopped process alive.
process.exit();
