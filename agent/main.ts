import { usageText, wantsHelp } from '../shared/cli-help.ts';
import { ConfigError, toError } from '../shared/errors.ts';
import { createLogger } from '../shared/logger.ts';
import type { SimulatedKernelFactory } from './assemble-agent.ts';
import type { AgentConfig } from './config/agent-config.ts';
import { agentSettings, parseAgentConfig } from './config/parse-agent-config.ts';
import { removeReadyFileSync } from './report/ready-file.ts';
import { NO_SIMULATED_KERNEL } from './no-simulated-kernel.ts';

/**
 * The node agent: `node agent/main.ts [--flag value ...]` (every flag is also an environment
 * variable, see config/). Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 on a fatal
 * error (the node lock lost, the HTTP port taken), 2 on a bad configuration.
 *
 * `simulatedKernel` is given only by the test entry point (test/doubles/simulated-agent-main.ts);
 * run as the image's entry point, `--kernel simulated` is a configuration error.
 */
export async function agentMain(options: { readonly simulatedKernel?: SimulatedKernelFactory } = {}): Promise<number> {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(usageText({
      summary: 'driver-rollout agent: detects the devices, builds and loads the kernel driver, reports readiness.',
      command: 'node agent/main.ts [--flag value ...]',
      settings: agentSettings(),
      exitCodes: '0 stopped on request, 1 fatal error, 2 bad configuration',
      readme: 'agent/README.md',
    }));
    return 0;
  }
  let config: AgentConfig;
  try {
    config = parseAgentConfig(process.argv.slice(2), process.env);
    if (config.kernelAdapter === 'simulated' && options.simulatedKernel === undefined) {
      throw new ConfigError('agent configuration', [NO_SIMULATED_KERNEL]);
    }
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`agent: invalid configuration:\n${error.problems.map((p) => `  ${p.path}: ${p.message}`).join('\n')}\n`);
    return 2;
  }
  const log = createLogger('agent', config.logLevel).child({ driver: config.driver, node: config.nodeName });
  const readyFile = config.readyFile;
  process.on('uncaughtException', (error) => {
    log.fatal({ err: error }, 'uncaught exception');
    removeReadyFileSync(readyFile);
    process.exit(1);
  });

  const stop = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      log.warn({ signal: name }, 'second signal: exiting at once');
      removeReadyFileSync(readyFile);
      process.exit(1);
    }
    log.info({ signal: name }, 'stopping');
    stop.abort(new Error(`received ${name}`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  try {
    // Loaded only now: a bad configuration exits 2 having loaded just the config modules (about a
    // third of the agent's start), so a misconfigured pod crash-loops cheaply.
    const { assembleAgent } = await import('./assemble-agent.ts');
    const agent = await assembleAgent(config, log, options.simulatedKernel === undefined ? {} : { simulatedKernel: options.simulatedKernel });
    try {
      await agent.run(stop.signal);
    } finally {
      await agent.close();
    }
    log.info('stopped');
    return 0;
  } catch (error) {
    log.fatal({ err: toError(error) }, 'agent failed');
    removeReadyFileSync(readyFile);
    return 1;
  }
}

// Exit explicitly: open API keep-alive sockets and timers must not keep a stopped agent alive.
if (import.meta.main) process.exit(await agentMain());
