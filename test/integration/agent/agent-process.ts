import { startProgram, type ProgramLogLine, type ProgramProcess } from '../../bed/program-process.ts';

export type LogLine = ProgramLogLine;

/** The real agent (`node agent/main.ts`) as a child process, as a container runtime starts it. */
export type AgentProcess = ProgramProcess;

/** Starts the agent with exactly `env` plus PATH (nothing inherited, like a pod's container). */
export function startAgentProcess(env: Readonly<Record<string, string>>): AgentProcess {
  return startProgram('agent/main.ts', { env });
}
