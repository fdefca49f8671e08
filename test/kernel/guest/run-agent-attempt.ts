import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { assembleAgent } from '../../../agent/assemble-agent.ts';
import { parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import type { KernelPort } from '../../../agent/kernel/kernel-port.ts';
import type { DriverState } from '../../../agent/report/driver-state.ts';

/** Phases after which the agent's first attempt has ended (a failure waits for its retry). */
const ATTEMPT_ENDS = new Set<DriverState['phase']>(['Loaded', 'NoDevice', 'Failed']);

/**
 * The whole agent as main.ts assembles it (config parsed from `env`, detection, build, load
 * plan, firmware, reloadDriver, the state reporter), on `kernel`, for one attempt: runs until
 * its state is Loaded, NoDevice or Failed, returns that state, then stops it (SIGTERM's path).
 * There is no API server here: the client points at a closed port, so the pod condition,
 * labels and Events fail and are retried in the background; the state is what those carry,
 * read from the reporter.
 */
export async function runAgentAttempt(kernel: KernelPort, env: Readonly<Record<string, string>>, logger: Logger, timeoutMs: number): Promise<DriverState> {
  const config = parseAgentConfig([], env);
  const agent = await assembleAgent(config, logger, { kernel, kubeConfig: unreachableApiServer() });
  const stop = new AbortController();
  const running = agent.run(stop.signal);
  const deadline = performance.now() + timeoutMs;
  try {
    for (;;) {
      const state = agent.reporter.current();
      if (ATTEMPT_ENDS.has(state.phase)) return state;
      if (performance.now() > deadline) throw new Error(`the agent's attempt did not end within ${timeoutMs / 1000}s; its state: ${state.phase} (${state.message})`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } finally {
    stop.abort();
    await running;
    await agent.close();
  }
}

function unreachableApiServer(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'none', server: 'https://127.0.0.1:9', skipTLSVerify: true }],
    users: [{ name: 'none', token: 'none' }],
    contexts: [{ name: 'none', cluster: 'none', user: 'none' }],
    currentContext: 'none',
  });
  return kc;
}
