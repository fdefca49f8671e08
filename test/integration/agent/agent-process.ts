import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');
const AGENT_MAIN = resolve(ROOT, 'agent/main.ts');

export interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** The real agent (`node agent/main.ts`) as a child process, as a container runtime starts it. */
export interface AgentProcess {
  readonly lines: readonly LogLine[];
  /** Exit code, or 128 + signal number. */
  readonly exited: Promise<number>;
  hasExited(): boolean;
  /** The first log line `match` accepts, waiting for it; fails if the agent exits first. */
  logLine(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  signal(name: NodeJS.Signals): void;
  output(): string;
}

/** Starts the agent with exactly `env` plus PATH (nothing inherited, like a pod's container). */
export function startAgentProcess(env: Readonly<Record<string, string>>): AgentProcess {
  const child = spawn(NODE, [AGENT_MAIN], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: LogLine[] = [];
  let output = '';
  let rest = '';
  let done = false;
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const l of listeners) l();
  };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const part of parts.filter((p) => p.trim() !== '')) {
      try {
        lines.push(JSON.parse(part) as LogLine);
      } catch {
        lines.push({ level: 'raw', msg: part });
      }
    }
    notify();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<number>((settle) => {
    child.on('close', (code, sig) => {
      done = true;
      settle(code ?? 128 + (sig === 'SIGKILL' ? 9 : 15));
      notify();
    });
  });
  return {
    lines,
    exited,
    hasExited: () => done,
    output: () => output,
    signal: (name) => {
      child.kill(name);
    },
    logLine: (match, timeoutMs = 60_000) =>
      new Promise<LogLine>((found, fail) => {
        const timer = setTimeout(() => {
          stop();
          fail(new Error(`agent logged no expected line within ${timeoutMs} ms:\n${output}`));
        }, timeoutMs);
        const check = () => {
          const line = lines.find(match);
          if (line === undefined && !done) return;
          stop();
          if (line === undefined) fail(new Error(`agent exited before the expected line:\n${output}`));
          else found(line);
        };
        const stop = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      }),
  };
}
