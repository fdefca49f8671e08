import { startProgram, type ProgramLogLine } from '../../bed/program-process.ts';

export type GateLogLine = ProgramLogLine;

export interface GateProcess {
  readonly pid: number;
  /** pino JSON lines from stdout, parsed, as they arrive. */
  readonly lines: readonly GateLogLine[];
  /** Exit code (or 128+signal) and when the parent saw the exit (performance.now()). */
  readonly exited: Promise<{ code: number; at: number }>;
  /** Resolves with the first line for which `match` is true; fails if the gate exits first. */
  waitForLine(match: (line: GateLogLine) => boolean, timeoutMs?: number): Promise<GateLogLine>;
  kill(signal: NodeJS.Signals): void;
  /** Everything written to stdout and stderr, for failure messages. */
  output(): string;
}

/**
 * Runs the real init container (`node init-container/main.ts`) as a child process with exactly
 * `env` (plus PATH), the way a kubelet runs it: no inherited KUBECONFIG or NODE_NAME.
 */
export function runGateProcess(env: Record<string, string>, args: readonly string[] = []): GateProcess {
  const gate = startProgram('init-container/main.ts', { env, args });
  return {
    pid: gate.pid,
    lines: gate.lines,
    exited: Promise.all([gate.exited, gate.exit]).then(([code, { at }]) => ({ code, at })),
    waitForLine: (match, timeoutMs = 30_000) => gate.logLine(match, timeoutMs),
    kill: (signal) => {
      gate.signal(signal);
    },
    output: () => gate.output(),
  };
}
