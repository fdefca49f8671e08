import { agentMain } from '../../agent/main.ts';
import { createSimulatedKernel } from './create-simulated-kernel.ts';

/**
 * The agent with the simulated kernel available (`--kernel simulated` / KERNEL_ADAPTER=simulated):
 * `node test/doubles/simulated-agent-main.ts [--flag value ...]`, same flags and exit codes as
 * agent/main.ts. For the integration tests and the demo only; the images never contain test/.
 */
process.exit(await agentMain({ simulatedKernel: createSimulatedKernel }));
