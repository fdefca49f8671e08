/**
 * Runs INSIDE the kernel-test guest, as a process of its own so a test can SIGKILL it: the agent's
 * own steps as its loop runs them (agent/create-agent-steps.ts, configured by the DaemonSet's
 * environment: take the node lock, detect, build, load through reloadDriver) on the real kernel
 * adapter, stopped for good at a point of the reload by pausing-kernel.ts. Without the reporter and
 * its Kubernetes client: importing them doubles the start under emulation, and a kill before the
 * readiness report never reaches them.
 *
 * Usage: node run-killable-agent.ts <request.json> (a KillableAgentRequest). The log goes to
 * `logFile`; should the load end, `resultFile` gets {"summary": "..."} or {"failure": "<stack>"}.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { pino } from 'pino';
import { acquireNodeLock } from '../../../agent/acquire-node-lock.ts';
import { parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import { createAgentSteps } from '../../../agent/create-agent-steps.ts';
import { systemHostInfo } from '../../../agent/detect/host-info.ts';
import { createRealKernel } from '../../../agent/kernel/real-kernel.ts';
import { pausingKernel, type PausePoint } from './pausing-kernel.ts';

export interface KillableAgentRequest {
  readonly env: Readonly<Record<string, string>>;
  readonly logFile: string;
  readonly resultFile: string;
  /** Stop for good there (until killed); `markerFile` says it got there. None: run until killed from outside. */
  readonly pause?: { readonly at: PausePoint; readonly markerFile: string };
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
  const steps = createAgentSteps(config, kernel, systemHostInfo(), log);
  const detection = await steps.detect();
  const built = await steps.build(detection, stop.signal);
  outcome = { summary: (await steps.load(built, stop.signal)).summary };
  await release();
} catch (error) {
  outcome = { failure: error instanceof Error ? (error.stack ?? error.message) : String(error) };
}
await writeFile(`${request.resultFile}.tmp`, JSON.stringify(outcome));
await rename(`${request.resultFile}.tmp`, request.resultFile);
