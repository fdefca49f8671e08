import { readFile, symlink, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PausePoint } from '../guest/pausing-kernel.ts';
import type { KillableAgentRequest } from '../guest/run-killable-agent.ts';
import type { Guest } from './boot-guest.ts';
import { isReadable } from './is-readable.ts';
import { KernelTestBedError } from './kernel-test-bed-error.ts';
import { GUEST_NODE_COMPILE_CACHE, projectNode, shellQuote } from './run-guest-scenario.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const KILLABLE_AGENT = join(REPO, 'test', 'kernel', 'guest', 'run-killable-agent.ts');
const PAUSING_COMMAND = join(REPO, 'test', 'kernel', 'guest', 'pausing-command.sh');

/** Where the killable agent (guest/run-killable-agent.ts) is killed with SIGKILL. */
export type AgentKill =
  /** At a modprobe call of the driver's tree (guest/pausing-kernel.ts). */
  | { readonly kind: 'pause'; readonly at: PausePoint }
  /** As soon as `path` exists in the guest (a watcher polls it every 10 ms). */
  | { readonly kind: 'when-exists'; readonly path: string }
  /** When it runs `command` with exactly `args` (guest/pausing-command.sh on its PATH stops there). */
  | { readonly kind: 'at-command'; readonly command: string; readonly args: readonly string[] }
  /** Once its load is verified and its driver root published, while it waits as a running agent does. */
  | { readonly kind: 'verified' };

export interface KillAgentOptions {
  /** Also verify the load (daemons, driver root published) before the agent would end. */
  readonly verify?: boolean;
  /** Only catches a hang: starting Node and the agent's steps in the guest takes minutes under load. */
  readonly timeoutMs: number;
}

let agentCount = 0;

/**
 * Runs the killable agent (guest/run-killable-agent.ts: the agent's steps on the real kernel
 * adapter, configured by `env`) in the guest as a process of its own, kills it with SIGKILL at
 * `kill`, and resolves once it is gone, saying where it was killed. Throws (with its log) when
 * it ended, or never got there, before the kill.
 */
export async function runAgentUntilKilled(guest: Guest, env: Record<string, string>, kill: AgentKill, options: KillAgentOptions): Promise<string> {
  const base = join(guest.workDir, `killed-agent-${++agentCount}`);
  const files = { logFile: `${base}.log`, resultFile: `${base}.result.json`, markerFile: `${base}.paused.json` };
  const request: KillableAgentRequest = {
    env,
    logFile: files.logFile,
    resultFile: files.resultFile,
    ...(kill.kind === 'pause' ? { pause: { at: kill.at, markerFile: files.markerFile } } : {}),
    ...(options.verify === true || kill.kind === 'verified' ? { verify: true } : {}),
    ...(kill.kind === 'verified' ? { holdMarkerFile: files.markerFile } : {}),
  };
  const requestFile = `${base}.request.json`;
  await writeFile(requestFile, JSON.stringify(request));
  let prefix = '';
  if (kill.kind === 'at-command') {
    const bin = `${base}.bin`;
    await mkdir(bin);
    await symlink(PAUSING_COMMAND, join(bin, kill.command));
    prefix = `PAUSE_REAL=$(command -v ${shellQuote(kill.command)}) PAUSE_COMMAND_LINE=${shellQuote(kill.args.join(' '))} PAUSE_MARKER=${shellQuote(files.markerFile)} PATH=${shellQuote(bin)}:$PATH `;
  }
  const start = `cd ${shellQuote(REPO)} && ${prefix}NODE_COMPILE_CACHE=${shellQuote(GUEST_NODE_COMPILE_CACHE)} ${shellQuote(projectNode())} ${shellQuote(KILLABLE_AGENT)} ${shellQuote(requestFile)} >${shellQuote(`${base}.out`)} 2>&1 </dev/null & pid=$!`;
  const watcher = kill.kind === 'when-exists' ? `; until [ -e ${shellQuote(kill.path)} ] || [ -e ${shellQuote(files.resultFile)} ]; do sleep 0.01; done; kill -9 $pid` : '';
  const started = await guest.run(`${start}${watcher}; echo $pid`, { timeoutMs: options.timeoutMs });
  if (started.exitCode !== 0) throw new KernelTestBedError(`the killable agent did not start: ${started.stderr}`, { exitCode: started.exitCode });
  const pid = Number.parseInt(started.stdout.trim(), 10);
  if (kill.kind !== 'when-exists') {
    const pids = new Set([pid]);
    try {
      await waitFor(files.markerFile, files.logFile, files.resultFile, options.timeoutMs);
      // The pid the marker's writer names, and the agent's (a pausing command waits in a process of its own: it goes too).
      const marker = JSON.parse(await readFile(files.markerFile, 'utf8')) as { pid?: number; agent?: number };
      for (const other of [marker.pid, marker.agent]) if (other !== undefined) pids.add(other);
    } finally {
      // Also when it never got there: a live agent would hold the node's lock for the next case.
      await guest.run(`kill -9 ${[...pids].join(' ')} 2>/dev/null; true`);
    }
  }
  // A killed process may stay a zombie under the guest's init: gone means gone or Z.
  const gone = await guest.run(`while [ -e /proc/${pid}/stat ] && ! grep -q ') Z' /proc/${pid}/stat; do sleep 0.05; done`, { timeoutMs: 60_000 });
  if (gone.exitCode !== 0) throw new KernelTestBedError(`the killed agent ${pid} did not go: ${gone.stderr}`, { pid });
  if (await isReadable(files.resultFile)) throw new KernelTestBedError(`the agent ended before it was killed: ${await readFile(files.resultFile, 'utf8')}\n--- agent log ---\n${await tail(files.logFile)}`, { pid });
  switch (kill.kind) {
    case 'pause':
      return `${kill.at.when} modprobe ${kill.at.modprobe}`;
    case 'when-exists':
      return `when ${kill.path} appeared`;
    case 'at-command':
      return `at ${kill.command} ${kill.args.join(' ')}`;
    case 'verified':
      return 'verified, its driver root published';
  }
}

async function waitFor(file: string, logFile: string, failIfExists: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await isReadable(file))) {
    if (await isReadable(failIfExists)) throw new KernelTestBedError(`the agent ended before its pause: ${await readFile(failIfExists, 'utf8')}\n--- agent log ---\n${await tail(logFile)}`, { file });
    if (performance.now() > deadline) throw new KernelTestBedError(`${file} did not appear within ${timeoutMs / 1000}s\n--- agent log ---\n${await tail(logFile)}`, { file });
    await sleep(100);
  }
}

/** The end of the killed agent's log, for a failure's message. */
async function tail(file: string): Promise<string> {
  return (await readFile(file, 'utf8').catch(() => '')).slice(-6_000);
}
