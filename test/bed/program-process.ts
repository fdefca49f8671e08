import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { resolve } from 'node:path';
import { hasExited } from '../../shared/has-exited.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');

/** One pino JSON line from the program's stdout; a line that is not JSON reads as level 'raw'. */
export interface ProgramLogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** How the program ended, as Node reported it. */
export interface ProgramExit {
  /** The exit code, or null when a signal ended it. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** performance.now() when the parent saw the exit (before the last output was read). */
  readonly at: number;
}

/** One of our programs (`node <program>/main.ts`) as a child process, as a container runtime starts it. */
export interface ProgramProcess {
  readonly pid: number;
  /** Parsed log lines from stdout, as they arrive. */
  readonly lines: readonly ProgramLogLine[];
  /** Exit code, or 128 + signal number; resolves once stdout and stderr are fully read. */
  readonly exited: Promise<number>;
  /** The same exit in detail; resolves together with `exited`. */
  readonly exit: Promise<ProgramExit>;
  hasExited(): boolean;
  /** The first log line `match` accepts, waiting for it; fails if the program exits first. */
  logLine(match: (line: ProgramLogLine) => boolean, timeoutMs?: number): Promise<ProgramLogLine>;
  /** Sends `name` unless the program has already exited. */
  signal(name: NodeJS.Signals): void;
  /** Everything written to stdout (and stderr unless inherited), for failure messages. */
  output(): string;
}

export interface ProgramOptions {
  readonly env: Readonly<Record<string, string>>;
  readonly args?: readonly string[];
  /**
   * false (default): exactly `env` plus PATH, nothing inherited, like a pod's container (no stray
   * KUBECONFIG or NODE_NAME from the test runner). true: the runner's environment under `env`.
   */
  readonly inheritEnv?: boolean;
  /** true: stderr is passed on to the test runner's stderr as it comes instead of into output(). */
  readonly inheritStderr?: boolean;
}

/** Starts `node <mainPath>` (relative to the repository root) and collects its pino log lines. */
export function startProgram(mainPath: string, options: ProgramOptions): ProgramProcess {
  const env = options.inheritEnv === true ? { ...process.env, ...options.env } : { PATH: process.env.PATH ?? '', ...options.env };
  const child = spawn(NODE, [resolve(ROOT, mainPath), ...(options.args ?? [])], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: ProgramLogLine[] = [];
  const listeners = new Set<() => void>();
  const notify = (): void => {
    for (const l of listeners) l();
  };
  let output = '';
  let rest = '';
  let done = false;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const part of parts.filter((p) => p.trim() !== '')) {
      try {
        lines.push(JSON.parse(part) as ProgramLogLine);
      } catch {
        lines.push({ level: 'raw', msg: part });
      }
    }
    notify();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    if (options.inheritStderr === true) process.stderr.write(chunk);
    else output += chunk;
  });
  // The time is taken at 'exit'; the promises resolve at 'close', once the output is fully read.
  let exitAt = 0;
  child.on('exit', () => {
    exitAt = performance.now();
  });
  const exit = new Promise<ProgramExit>((settle) => {
    child.on('close', (code, signal) => {
      done = true;
      settle({ code, signal, at: exitAt });
      notify();
    });
  });
  const exited = exit.then(({ code, signal }) => code ?? 128 + (signal === null ? 0 : constants.signals[signal]));
  return {
    pid: child.pid ?? -1,
    lines,
    exited,
    exit,
    hasExited: () => done,
    output: () => output,
    signal: (name) => {
      if (!hasExited(child)) child.kill(name);
    },
    logLine: (match, timeoutMs = 60_000) =>
      new Promise<ProgramLogLine>((found, fail) => {
        const timer = setTimeout(() => {
          stop();
          fail(new Error(`${mainPath} logged no expected line within ${timeoutMs} ms:\n${output}`));
        }, timeoutMs);
        const check = (): void => {
          const line = lines.find(match);
          if (line === undefined && !done) return;
          stop();
          if (line === undefined) fail(new Error(`${mainPath} exited before the expected line:\n${output}`));
          else found(line);
        };
        const stop = (): void => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      }),
  };
}
