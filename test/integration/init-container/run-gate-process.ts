import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');
const MAIN = resolve(ROOT, 'init-container/main.ts');

export interface GateLogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export interface GateProcess {
  readonly pid: number;
  /** pino JSON lines from stdout, parsed, as they arrive. */
  readonly lines: GateLogLine[];
  /** Exit code (or 128+signal) and when the parent saw the exit (performance.now()). */
  readonly exited: Promise<{ code: number; at: number }>;
  /** Resolves with the first line for which `match` is true. */
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
  const child = spawn(NODE, [MAIN, ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: GateLogLine[] = [];
  const waiters = new Set<() => void>();
  let text = '';
  let partial = '';
  child.stdout.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    partial += chunk.toString('utf8');
    const complete = partial.split('\n');
    partial = complete.pop() ?? '';
    for (const line of complete) {
      if (line.trim() === '') continue;
      try {
        lines.push(JSON.parse(line) as GateLogLine);
      } catch {
        lines.push({ level: 'raw', msg: line });
      }
    }
    for (const w of waiters) w();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
  });
  // The time is taken at 'exit'; the promise resolves at 'close', once stdout is fully read.
  let exitAt = 0;
  child.on('exit', () => {
    exitAt = performance.now();
  });
  const exited = new Promise<{ code: number; at: number }>((done) => {
    child.on('close', (code, signal) => {
      done({ code: code ?? 128 + (signal === 'SIGKILL' ? 9 : 15), at: exitAt });
      for (const w of waiters) w();
    });
  });
  let exitedNow = false;
  void exited.then(() => {
    exitedNow = true;
  });
  return {
    pid: child.pid ?? -1,
    lines,
    exited,
    output: () => text,
    kill: (signal) => {
      child.kill(signal);
    },
    waitForLine: (match, timeoutMs = 30_000) =>
      new Promise<GateLogLine>((found, fail) => {
        const check = (): void => {
          const line = lines.find(match);
          if (line !== undefined) {
            finish();
            found(line);
          } else if (exitedNow) {
            finish();
            fail(new Error(`gate exited before the expected log line; output:\n${text}`));
          }
        };
        const timer = setTimeout(() => {
          finish();
          fail(new Error(`no expected log line within ${timeoutMs} ms; output:\n${text}`));
        }, timeoutMs);
        const finish = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
  };
}
