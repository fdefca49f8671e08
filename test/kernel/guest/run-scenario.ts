/**
 * Runs INSIDE the kernel-test guest (see ../harness/boot-guest.ts), as one long-lived process
 * like the agent itself: it serves scenarios (./scenario.ts) against the REAL kernel: the
 * agent's real adapter (modprobe, rmmod, depmod, /sys/module), workload processes that hold the
 * driver's device open, and the kernel log.
 *
 * Usage: node run-scenario.ts <dir>. For N = 1, 2, ... it waits for <dir>/N.json (a Scenario),
 * runs it with the agent's log in <dir>/N.log, and writes <dir>/N.result.json (by rename):
 * {"report": ScenarioReport} (a refusal by the agent is a result) or {"failure": "<stack>"}.
 * One process for all scenarios: starting Node and importing the agent costs seconds under
 * emulation.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import { access, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { pino, type Logger } from 'pino';
import { createRealKernel } from '../../../agent/kernel/real-kernel.ts';
import { runScenario, type Scenario, type ScenarioOutcome, type ScenarioWorld } from './scenario.ts';
import { hasExited } from '../../../shared/has-exited.ts';

const run = promisify(execFile);

async function serve(dir: string): Promise<never> {
  for (let n = 1; ; n++) {
    const request = join(dir, `${n}.json`);
    while (!(await exists(request))) await sleep(25);
    const logger = pino({ level: 'debug', base: { component: 'agent', scenario: n } }, pino.destination({ dest: join(dir, `${n}.log`), sync: true }));
    let outcome: ScenarioOutcome;
    try {
      outcome = { report: await runScenario(realWorld(logger), JSON.parse(await readFile(request, 'utf8')) as Scenario, logger) };
    } catch (error) {
      outcome = { failure: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
    const result = join(dir, `${n}.result.json`);
    await writeFile(`${result}.tmp`, JSON.stringify(outcome));
    await rename(`${result}.tmp`, result);
  }
}

function realWorld(logger: Logger): ScenarioWorld {
  const holders: ChildProcess[] = [];
  return {
    kernel: createRealKernel({ logger }),
    sysModuleDir: '/sys/module',
    async holdDevice(device) {
      const child = await holdOpen(device);
      holders.push(child);
      return child.pid;
    },
    async releaseDevices() {
      for (const child of holders.splice(0)) await release(child);
    },
    openDevice: (device) => Promise.resolve(openAndClose(device)),
    async clearKernelLog() {
      await run('dmesg', ['--clear']);
    },
    async readKernelLog() {
      const { stdout } = await run('dmesg', ['--notime']);
      return stdout.split('\n').filter((line) => line.trim() !== '');
    },
  };
}

/** The child inherits the open file; ours is closed at once, so only the child holds the device. */
async function holdOpen(device: string): Promise<ChildProcess> {
  const fd = openSync(device, 'r');
  try {
    const child = spawn('sleep', ['600'], { stdio: [fd, 'ignore', 'inherit'] });
    await once(child, 'spawn');
    return child;
  } finally {
    closeSync(fd);
  }
}

/** Resolves once the child is reaped: by then the kernel has released its files (exit_files runs before exit_notify). */
async function release(child: ChildProcess): Promise<void> {
  if (hasExited(child)) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

function openAndClose(device: string): string | undefined {
  try {
    closeSync(openSync(device, 'r'));
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: run-scenario.ts <dir>');
await serve(dir);
