import { ConfigError, toError } from '../shared/errors.ts';
import { createLogger } from '../shared/logger.ts';
import { assembleAgent } from './assemble-agent.ts';
import { parseAgentConfig, type AgentConfig } from './config.ts';
import { removeReadyFileSync } from './report/ready-file.ts';

/**
 * The node agent: `node agent/main.ts [--flag value ...]` (every flag is also an environment
 * variable, see config.ts). Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 on a fatal
 * error (the node lock lost, the HTTP port taken), 2 on a bad configuration.
 */
async function main(): Promise<number> {
  let config: AgentConfig;
  try {
    config = parseAgentConfig(process.argv.slice(2), process.env);
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
    const agent = await assembleAgent(config, log);
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
process.exit(await main());
