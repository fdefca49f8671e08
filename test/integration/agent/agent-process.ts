import { startProgram, type ProgramLogLine, type ProgramProcess } from '../../bed/program-process.ts';

export type LogLine = ProgramLogLine;

/**
 * The real agent as a child process, as a container runtime starts it, through the test entry
 * point (test/doubles/simulated-agent-main.ts: agent/main.ts plus the simulated kernel for
 * KERNEL_ADAPTER=simulated).
 */
export type AgentProcess = ProgramProcess;

/** Starts the agent with exactly `env` plus PATH (nothing inherited, like a pod's container). */
export function startAgentProcess(env: Readonly<Record<string, string>>): AgentProcess {
  return startProgram('test/doubles/simulated-agent-main.ts', { env });
}
