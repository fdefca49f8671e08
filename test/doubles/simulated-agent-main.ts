import { agentMain } from '../../agent/main.ts';
import { ConfigError } from '../../shared/errors.ts';
import { simulatedKernelFactory } from './create-simulated-kernel.ts';
import { parseSimulatedKernelSettings } from './simulated-kernel-settings.ts';

/**
 * The agent with the simulated kernel available (`--kernel simulated` / KERNEL_ADAPTER=simulated):
 * `node test/doubles/simulated-agent-main.ts [--flag value ...]`, same flags and exit codes as
 * agent/main.ts, plus the simulated kernel's own `--simulated-*` settings (or SIMULATED_*
 * variables), which it takes out before the agent reads the rest. For the integration tests and
 * the demo only; the images never contain test/.
 */
let parsed: ReturnType<typeof parseSimulatedKernelSettings>;
try {
  parsed = parseSimulatedKernelSettings(process.argv.slice(2), process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`agent: invalid configuration:\n${error.problems.map((p) => `  ${p.path}: ${p.message}`).join('\n')}\n`);
  process.exit(2);
}
process.argv.splice(2, process.argv.length - 2, ...parsed.agentArgv);
process.exit(await agentMain({ simulatedKernel: simulatedKernelFactory(parsed.settings) }));
