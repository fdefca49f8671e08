import { spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { abortableSleep, isAborted } from '../../shared/abortable-sleep.ts';
import { backoffDelay, type BackoffPolicy } from '../../shared/backoff.ts';
import { ifExists, readTextIfExists } from '../../shared/fs/if-exists.ts';
import type { Logger } from '../../shared/logger.ts';
import type { DaemonSpec } from './plan/plan-gpu-daemons.ts';

export type DaemonHealth =
  | { readonly state: 'starting' }
  | { readonly state: 'running'; readonly pid: number; readonly restarts: number }
  | { readonly state: 'failed'; readonly restarts: number; readonly lastFailure: string }
  | { readonly state: 'stopped' };

export interface SuperviseOptions {
  readonly spec: DaemonSpec;
  /** Delay before each restart; a run longer than `maxMs` starts the count afresh. */
  readonly restart: BackoffPolicy;
  readonly random: () => number;
  /** How often a forked daemon's pid is checked (a child the agent started itself is seen exiting at once). */
  readonly pollMs: number;
  /** How long stop waits after SIGTERM before SIGKILL. */
  readonly stopTimeoutMs: number;
  readonly log: Logger;
}

export interface DaemonSupervisor {
  readonly name: string;
  health(): DaemonHealth;
  /** SIGTERM (SIGKILL after stopTimeoutMs), no restart; resolves once the daemon is gone. */
  stop(): Promise<void>;
}

const OUTPUT_TAIL_CHARS = 400;

/**
 * Starts `spec` and keeps it running: when it exits (or its launcher fails, or a forked daemon's
 * pid disappears) it is started again after a backoff delay, and `health()` says `failed`, with
 * how it ended, until it runs again. The caller reports that as a reason.
 */
export function superviseDaemon(options: SuperviseOptions): DaemonSupervisor {
  const { spec, log } = options;
  const stopping = new AbortController();
  let health: DaemonHealth = { state: 'starting' };
  let pid: number | undefined;
  const loop = (async () => {
    let failures = 0;
    while (!stopping.signal.aborted) {
      const started = performance.now();
      const ended = await runOnce(options, stopping.signal, (running) => {
        pid = running;
        health = { state: 'running', pid: running, restarts: failures };
        log.info({ daemon: spec.name, pid: running, restarts: failures }, 'daemon running');
      });
      pid = undefined;
      if (isAborted(stopping.signal)) break;
      if (performance.now() - started > options.restart.maxMs) failures = 0;
      failures += 1;
      health = { state: 'failed', restarts: failures, lastFailure: ended };
      const delay = backoffDelay(failures - 1, options.restart, options.random);
      log.warn({ daemon: spec.name, restarts: failures, delayMs: delay }, `daemon ended: ${ended}; restarting`);
      await abortableSleep(delay, stopping.signal);
    }
    health = { state: 'stopped' };
  })();
  return {
    name: spec.name,
    health: () => health,
    async stop() {
      stopping.abort();
      if (pid !== undefined) await terminate(pid, options);
      await loop;
    },
  };
}

/** One run: resolves how it ended (`exited with code 1: ...`), or '' when stopped. */
async function runOnce(options: SuperviseOptions, signal: AbortSignal, onRunning: (pid: number) => void): Promise<string> {
  const { spec } = options;
  const [file, ...args] = spec.argv;
  if (file === undefined) return 'no command';
  if (spec.pidFile !== undefined) await rm(spec.pidFile, { force: true });
  if (isAborted(signal)) return '';
  let output = '';
  const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (chunk: Buffer) => { output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS); };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<string>((resolve) => {
    child.once('error', (error) => { resolve(`cannot start ${file}: ${error.message}`); });
    child.once('exit', (code, sig) => { resolve(code === null ? `killed by ${sig ?? 'a signal'}` : `exited with code ${code}`); });
  });
  const said = () => (output.trim() === '' ? '' : `: ${output.trim().split('\n').slice(-2).join(' | ')}`);
  if (spec.pidFile === undefined) {
    // stop() terminates the pid onRunning reported.
    if (child.pid !== undefined) onRunning(child.pid);
    const how = await exited;
    return isAborted(signal) ? '' : `${how}${said()}`;
  }
  // A forking daemon: the launcher exits 0 once the daemon runs, the daemon's pid in its pid file.
  const launcher = await exited;
  if (launcher !== 'exited with code 0') return `${launcher}${said()}`;
  // Read even when stopped meanwhile: a daemon that was forked is terminated, not left behind.
  const daemonPid = await readPid(spec.pidFile, options);
  if (daemonPid === undefined) return isAborted(signal) ? '' : `exited with code 0 and wrote no live pid to ${spec.pidFile}${said()}`;
  if (isAborted(signal)) {
    await terminate(daemonPid, options);
    return '';
  }
  onRunning(daemonPid);
  while (!isAborted(signal) && (await isAlive(daemonPid))) await abortableSleep(options.pollMs, signal);
  return isAborted(signal) ? '' : `process ${daemonPid} (${spec.pidFile}) ended`;
}

/** The pid in the pid file once a live process has it; waits up to stopTimeoutMs for the daemon to write it. */
async function readPid(pidFile: string, options: SuperviseOptions): Promise<number | undefined> {
  const deadline = performance.now() + options.stopTimeoutMs;
  for (;;) {
    const text = await readTextIfExists(pidFile);
    const pid = text === undefined ? Number.NaN : Number.parseInt(text.trim(), 10);
    if (Number.isInteger(pid) && pid > 0 && (await isAlive(pid))) return pid;
    if (performance.now() > deadline) return undefined;
    await abortableSleep(options.pollMs);
  }
}

/** A process that exists and is no zombie (a forked daemon whose parent is gone may sit unreaped). */
async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const stat = await ifExists(() => readFile(`/proc/${pid}/stat`, 'utf8'), { alsoCodes: ['ESRCH'] });
  if (stat === undefined) return false;
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** SIGTERM, then SIGKILL once stopTimeoutMs passed; resolves when the process is gone. */
async function terminate(pid: number, options: SuperviseOptions): Promise<void> {
  signalProcess(pid, 'SIGTERM');
  const deadline = performance.now() + options.stopTimeoutMs;
  while (await isAlive(pid)) {
    if (performance.now() > deadline) {
      options.log.warn({ daemon: options.spec.name, pid }, `no exit within ${options.stopTimeoutMs} ms of SIGTERM: SIGKILL`);
      signalProcess(pid, 'SIGKILL');
    }
    await abortableSleep(Math.min(options.pollMs, 100));
  }
}

function signalProcess(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
