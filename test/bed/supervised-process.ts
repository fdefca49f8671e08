import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A test-bed component (etcd, kube-apiserver, ...) running under supervise.sh in its own
 * process group, logging to `<workDir>/<name>.log`. Its group id is recorded in
 * `<workDir>/pids` so a later run can reap it if this one was killed.
 */
export interface SupervisedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  /** Resolves with the exit code (or signal name) once the supervisor has ended. */
  readonly exited: Promise<number | string>;
  stop(): Promise<void>;
  isRunning(): boolean;
}

export function startSupervised(workDir: string, name: string, command: string, args: readonly string[]): SupervisedProcess {
  const logPath = join(workDir, `${name}.log`);
  const child = spawn('bash', [join(import.meta.dirname, 'supervise.sh'), String(process.pid), logPath, '--', command, ...args], {
    detached: true,
    stdio: 'ignore',
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start ${name} (${command})`);
  appendFileSync(join(workDir, 'pids'), `${pid}\n`);
  let running = true;
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      running = false;
      resolve(code ?? signal ?? 'unknown');
    });
  });
  // The runner must not wait for test-bed processes to end before it can exit.
  child.unref();
  return {
    name,
    pid,
    logPath,
    exited,
    isRunning: () => running,
    // Test-bed state is throw-away: no graceful shutdown, the whole process group is killed.
    stop: async () => {
      if (!running) return;
      child.ref(); // keep the event loop alive until the exit is seen
      killGroup(pid, 'SIGKILL');
      await exited;
      // The supervisor can be reaped before the component it ran: wait for the whole group,
      // so that a restart on the same port never races the old process for it.
      while (groupExists(pid)) await sleep(20);
    },
  };
}

function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** The last lines of a component's log, for error messages when it fails to start. */
export async function logTail(path: string, lines = 30): Promise<string> {
  try {
    return (await readFile(path, 'utf8')).trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
