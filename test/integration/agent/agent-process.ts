import { startProgram, type ProgramLogLine, type ProgramProcess } from '../../bed/program-process.ts';

export type LogLine = ProgramLogLine;

/**
 * The real agent as a child process, as a container runtime starts it, through the test entry
 * point (test/doubles/simulated-agent-main.ts: agent/main.ts plus the simulated kernel for
 * KERNEL_ADAPTER=simulated).
 */
export type AgentProcess = ProgramProcess;

/**
 * Bound on an agent's first load, which compiles the sample driver with kbuild into an empty
 * cache: 40 s at load 34 with the machine to itself (npm run bench -- --only agent), over 120 s
 * with two test suites at once at load 36. The bound only catches a hang; a test that waits this
 * long sets its own timeout to AGENT_TEST_TIMEOUT_MS.
 */
export const FIRST_LOAD_HANG_MS = 420_000;

/** Timeout of a test that waits up to FIRST_LOAD_HANG_MS for a first load, with room for the rest. */
export const AGENT_TEST_TIMEOUT_MS = 600_000;

/** Starts the agent with exactly `env` plus PATH (nothing inherited, like a pod's container). */
export function startAgentProcess(env: Readonly<Record<string, string>>): AgentProcess {
  return startProgram('test/doubles/simulated-agent-main.ts', { env });
}
