/**
 * Runs INSIDE the kernel-test guest, as a process of its own so a test can SIGKILL it: the agent's
 * own steps as its loop runs them (agent/create-agent-steps.ts, configured by the DaemonSet's
 * environment: take the node lock, detect, build, load through reloadDriver) on the real kernel
 * adapter, stopped for good at a point of the reload by pausing-kernel.ts. Without the reporter and
 * its Kubernetes client: importing them doubles the start under emulation, and a kill before the
 * readiness report never reaches them.
 *
 * With `verify`, the load is verified as the loop verifies it, with the image's driver root
 * (DRIVER_ROOT_DIR) published as the agent publishes it; with `holdMarkerFile` the process then
 * writes that file and waits to be killed (an agent whose root is published, re-checking it).
 *
 * Usage: node run-killable-agent.ts <request.json> (a KillableAgentRequest). The log goes to
 * `logFile`; should the agent end, `resultFile` gets {"summary": "..."} or {"failure": "<stack>"}.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { pino } from 'pino';
import { acquireNodeLock } from '../../../agent/acquire-node-lock.ts';
import { parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import { createAgentSteps } from '../../../agent/create-agent-steps.ts';
import { systemHostInfo } from '../../../agent/detect/host-info.ts';
import { createRealKernel } from '../../../agent/kernel/real-kernel.ts';
import { driverRootOf } from '../../../agent/root/driver-root-of.ts';
import { pausingKernel, type PausePoint } from './pausing-kernel.ts';

export interface KillableAgentRequest {
  readonly env: Readonly<Record<string, string>>;
  readonly logFile: string;
  readonly resultFile: string;
  /** Stop for good there (until killed); `markerFile` says it got there. None: run until killed from outside. */
  readonly pause?: { readonly at: PausePoint; readonly markerFile: string };
  /** After the load, verify it as the agent's loop does: daemons, driver root published. */
  readonly verify?: boolean;
  /** Once done, write this file (JSON: this process's pid) and wait to be killed instead of ending. */
  readonly holdMarkerFile?: string;
}

const requestFile = process.argv[2];
if (requestFile === undefined) throw new Error('usage: run-killable-agent.ts <request.json>');
const request = JSON.parse(await readFile(requestFile, 'utf8')) as KillableAgentRequest;
const log = pino({ level: 'debug', base: { component: 'agent', pid: process.pid } }, pino.destination({ dest: request.logFile, sync: true }));
const config = parseAgentConfig([], request.env);
const real = createRealKernel({ logger: log });
const kernel = request.pause === undefined ? real : pausingKernel(real, config.moduleRoot, request.pause.at, request.pause.markerFile);
let outcome: unknown;
try {
  const stop = new AbortController();
  const release = await acquireNodeLock({
    path: config.lockPath,
    signal: stop.signal,
    onWaiting: () => {
      log.info('waiting for the node lock');
    },
    onCompromised: (error) => {
      log.error({ err: error }, 'node lock lost');
    },
  });
  const steps = createAgentSteps(config, kernel, systemHostInfo(), log, { root: driverRootOf(config, log) });
  const detection = await steps.detect();
  const built = await steps.build(detection, stop.signal);
  const loaded = await steps.load(built, stop.signal);
  const verified = request.verify === true ? await steps.verify(built) : undefined;
  outcome = { summary: loaded.summary, ...(verified === undefined ? {} : { verified: verified.version }) };
  if (request.holdMarkerFile !== undefined) {
    await writeFile(request.holdMarkerFile, JSON.stringify({ pid: process.pid }));
    // A timer keeps the process alive, as the agent's loop would be; it is killed (SIGKILL) here.
    await new Promise<never>(() => setInterval(() => undefined, 60_000));
  }
  await release();
} catch (error) {
  outcome = { failure: error instanceof Error ? (error.stack ?? error.message) : String(error) };
}
await writeFile(`${request.resultFile}.tmp`, JSON.stringify(outcome));
await rename(`${request.resultFile}.tmp`, request.resultFile);
