import { parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { ConfigError } from '../../../../shared/errors.ts';

/** The least environment the agent starts with. */
export const BASE_AGENT_ENV = { NODE_NAME: 'n', POD_NAME: 'p', POD_NAMESPACE: 'ns', DRIVER_NAME: 'gpu', DRIVER_VERSION: '1', DRIVER_SOURCE_DIR: '/src' };

/** The problems parseAgentConfig names for the base environment plus `env`, as `<flag / VARIABLE>: <message>`. */
export function agentConfigProblems(env: Record<string, string>): string[] {
  try {
    parseAgentConfig([], { ...BASE_AGENT_ENV, ...env });
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems.map((p) => `${p.path}: ${p.message}`);
  }
}
