/**
 * Runs INSIDE the kernel-test guest (see ../harness/boot-guest.ts), as one long-lived process
 * like the agent itself: it serves scenarios, each a list of steps. Reload steps call the
 * agent's reloadDriver with its REAL kernel adapter (modprobe, rmmod, depmod, /sys/module); the
 * other steps play the workload (a process holding the driver's device open).
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
import { reloadDriver, type DriverToLoad, type ReloadResult } from '../../../agent/kernel/reload-driver.ts';
import type { ModuleTree } from '../../../agent/kernel/kernel-port.ts';
import type { ModuleParameters } from '../../../agent/kernel/modprobe-config.ts';
import type { DeviceUserLookup } from '../../../agent/kernel/unload-driver.ts';
import { DriverRolloutError } from '../../../shared/errors.ts';
import { readLoadedModule, type LoadedModule } from '../../../shared/kmod/read-loaded-module.ts';

export type ScenarioStep =
  /** The agent makes the kernel run `built` (reloadDriver with the real adapter). */
  | {
      readonly kind: 'reload';
      readonly built: DriverToLoad;
      readonly tree: ModuleTree;
      readonly parameters: ModuleParameters;
      /** Device files whose holders a refusal should name (the agent's opt-in /proc scan). */
      readonly deviceUsers?: DeviceUserLookup;
    }
  /** A workload process (sleep) starts with the device open on its stdin and keeps it open. */
  | { readonly kind: 'hold-device'; readonly device: string }
  /** That process is killed and reaped. */
  | { readonly kind: 'release-device' }
  /** Opens and closes the device: does the loaded driver still serve it? */
  | { readonly kind: 'open-device'; readonly device: string }
  /** The real adapter's unload (rmmod) of one module, bypassing reloadDriver's own in-use check. */
  | { readonly kind: 'unload-module'; readonly module: string };

export interface Scenario {
  readonly steps: readonly ScenarioStep[];
  /** Modules whose /sys/module entry is reported after every step. */
  readonly watch: readonly string[];
}

export interface StepReport {
  readonly kind: ScenarioStep['kind'];
  readonly durationMs: number;
  readonly result?: ReloadResult;
  readonly error?: { readonly name: string; readonly message: string; readonly fields: Readonly<Record<string, unknown>> };
  /** For hold-device: the pid of the process holding the device. */
  readonly holderPid?: number;
  /** For open-device: the errno code when the open failed. */
  readonly openError?: string;
  /** /sys/module/<m> of the watched modules after the step, read by this script, not the agent. */
  readonly after: Readonly<Record<string, LoadedModule | null>>;
  /** Kernel log lines written during the step (module init/exit messages), in the kernel's order. */
  readonly kernelLog: readonly string[];
}

export interface ScenarioReport {
  readonly steps: readonly StepReport[];
}

export type ScenarioOutcome = { readonly report: ScenarioReport } | { readonly failure: string };

const run = promisify(execFile);

async function serve(dir: string): Promise<never> {
  for (let n = 1; ; n++) {
    const request = join(dir, `${n}.json`);
    while (!(await exists(request))) await sleep(25);
    const logger = pino({ level: 'debug', base: { component: 'agent', scenario: n } }, pino.destination({ dest: join(dir, `${n}.log`), sync: true }));
    let outcome: ScenarioOutcome;
    try {
      outcome = { report: await runScenario(JSON.parse(await readFile(request, 'utf8')) as Scenario, logger) };
    } catch (error) {
      outcome = { failure: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
    const result = join(dir, `${n}.result.json`);
    await writeFile(`${result}.tmp`, JSON.stringify(outcome));
    await rename(`${result}.tmp`, result);
  }
}

async function runScenario(scenario: Scenario, logger: Logger): Promise<ScenarioReport> {
  const reports: StepReport[] = [];
  let holder: ChildProcess | undefined;
  try {
    for (const step of scenario.steps) {
      // The kernel log is the kernel's own account of what was loaded and unloaded, in order.
      await run('dmesg', ['--clear']);
      const started = performance.now();
      const outcome: Partial<StepReport> = {};
      switch (step.kind) {
        case 'reload':
          Object.assign(outcome, await reload(step, logger));
          break;
        case 'hold-device':
          holder = await holdOpen(step.device);
          Object.assign(outcome, { holderPid: holder.pid });
          break;
        case 'release-device':
          if (holder !== undefined) await release(holder);
          holder = undefined;
          break;
        case 'open-device':
          Object.assign(outcome, openAndClose(step.device));
          break;
        case 'unload-module':
          Object.assign(outcome, await reportError(() => createRealKernel({ logger }).unload(step.module)));
          break;
      }
      const durationMs = Math.round(performance.now() - started);
      reports.push({ kind: step.kind, durationMs, ...outcome, after: await snapshot(scenario.watch), kernelLog: await kernelLog() });
    }
  } finally {
    if (holder !== undefined) await release(holder);
  }
  return { steps: reports };
}

async function reload(step: Extract<ScenarioStep, { kind: 'reload' }>, logger: Logger): Promise<Pick<StepReport, 'result' | 'error'>> {
  let result: ReloadResult | undefined;
  const failure = await reportError(async () => {
    result = await reloadDriver(createRealKernel({ logger }), step.built, {
      tree: step.tree,
      parameters: step.parameters,
      logger,
      ...(step.deviceUsers === undefined ? {} : { deviceUsers: step.deviceUsers }),
    });
  });
  return result === undefined ? failure : { result };
}

/** Errors of the agent are results here: their class, message and structured fields. */
async function reportError(action: () => Promise<void>): Promise<Pick<StepReport, 'error'>> {
  try {
    await action();
    return {};
  } catch (thrown) {
    if (!(thrown instanceof Error)) throw thrown;
    return { error: { name: thrown.name, message: thrown.message, fields: thrown instanceof DriverRolloutError ? thrown.fields : {} } };
  }
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
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

function openAndClose(device: string): Pick<StepReport, 'openError'> {
  try {
    closeSync(openSync(device, 'r'));
    return {};
  } catch (error) {
    return { openError: (error as NodeJS.ErrnoException).code ?? String(error) };
  }
}

async function snapshot(modules: readonly string[]): Promise<Record<string, LoadedModule | null>> {
  const out: Record<string, LoadedModule | null> = {};
  for (const m of modules) out[m] = (await readLoadedModule('/sys/module', m)) ?? null;
  return out;
}

async function kernelLog(): Promise<string[]> {
  const { stdout } = await run('dmesg', ['--notime']);
  return stdout.split('\n').filter((line) => line.trim() !== '');
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
