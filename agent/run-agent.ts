import { performance } from 'node:perf_hooks';
import { abortableSleep, untilAborted } from '../shared/abortable-sleep.ts';
import { backoffDelay } from '../shared/backoff.ts';
import { toError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { NodeLockError } from './acquire-node-lock.ts';
import type { BuiltDriver } from './build/built-driver.ts';
import { competingBoundDrivers, describeDevice, hasDevices, type NodeDetection } from './detect/detect-node.ts';
import { describeFailure, type AgentStep } from './describe-failure.ts';
import { DriverRolledBackError } from './kernel/kernel-errors.ts';
import type { AgentMetrics } from './report/agent-metrics.ts';
import { truncateMessage, type DriverPhase, type DriverState } from './report/driver-state.ts';
import type { StateReporter } from './report/state-reporter.ts';

/**
 * Up to 20 % is taken off each retry delay (never added: the configured maximum stays a maximum),
 * so that agents that failed together (an outage) do not retry together.
 */
const RETRY_JITTER = 0.2;

/** What the reload did: replaced modules, or found the built ones already loaded (srcversion fast path). */
export interface LoadOutcome {
  readonly changed: boolean;
  /** One line for the log and the condition, e.g. `unloaded [a, b], loaded [b, a]`. */
  readonly summary: string;
}

/** The driver as /sys/module shows it after loading. */
export interface VerifiedDriver {
  readonly version: string;
  readonly modules: readonly string[];
  /** What is loaded and by which pod, for the node annotation (shared/driver-identity.ts); none in flows without a cluster. */
  readonly loadedDriver?: string | undefined;
}

/** The work the flow orders; main.ts wires them to detection, buildDriver and reloadDriver. */
export interface AgentSteps {
  detect(): Promise<NodeDetection>;
  build(detection: NodeDetection, signal: AbortSignal): Promise<BuiltDriver>;
  load(built: BuiltDriver, signal: AbortSignal): Promise<LoadOutcome>;
  /** Throws when a module is not loaded or is not the built one. */
  verify(built: BuiltDriver): Promise<VerifiedDriver>;
  /** Unloads the driver's modules (never forced); used on stop when configured. */
  unload(signal: AbortSignal): Promise<void>;
}

export interface LockEvents {
  /** Another agent holds the lock (called on every try while it does). */
  readonly onWaiting: () => void;
  /** The lock was lost while held. */
  readonly onLost: (error: Error) => void;
}

export interface AgentDeps {
  readonly driver: string;
  readonly steps: AgentSteps;
  readonly reporter: StateReporter;
  readonly metrics: AgentMetrics;
  readonly log: Logger;
  /** Takes the node lock, waiting while another agent holds it; resolves to its release. */
  readonly lock: (signal: AbortSignal, events: LockEvents) => Promise<() => Promise<void>>;
  readonly retry: { readonly initialMs: number; readonly maxMs: number };
  /** How often a loaded driver is checked again (someone may `rmmod` it behind our back). */
  readonly verifyIntervalMs: number;
  readonly unloadOnStop: boolean;
  /** How long stopping waits for the API server to take the not-ready condition. */
  readonly stopFlushMs: number;
  readonly random: () => number;
  /**
   * Started in the background once the driver first loads, for the kernel it loaded on (the
   * next-kernel preflight); runs until the agent stops. Its failures are its own to report.
   */
  readonly preflight?: ((runningKernel: string, signal: AbortSignal) => Promise<void>) | undefined;
  /** Last on stop, after any unload: what the driver leaves on the host goes when it is uninstalled. */
  readonly onStop?: (() => Promise<void>) | undefined;
}

type Attempt =
  | { readonly kind: 'loaded'; readonly built: BuiltDriver }
  | { readonly kind: 'no-device' }
  | { readonly kind: 'failed'; readonly step: AgentStep; readonly error: Error; readonly hint?: string | undefined }
  | { readonly kind: 'aborted' };

const STOPPING: DriverState = { phase: 'Stopping', reason: 'Stopping', message: 'agent stopping: driver readiness withdrawn' };

/**
 * The agent's life: lock → detect → (no device: Ready "NoDevice" and idle) → build → load →
 * verify → Ready, then re-verify now and then. A failed step is shown with its reason and
 * retried with backoff; nothing a step throws crashes the agent. On `signal` (SIGTERM),
 * readiness is withdrawn at once (the not-ready condition is sent within `stopFlushMs`), the
 * driver is unloaded only if configured, and the lock is released. Throws only when the lock is
 * lost, so main.ts exits non-zero and the kubelet restarts the container.
 */
export async function runAgent(deps: AgentDeps, signal: AbortSignal): Promise<void> {
  const { log, reporter } = deps;
  const stop = new AbortController();
  let lockLost: Error | undefined;
  const onAbort = () => {
    stop.abort(signal.reason);
    reporter.report(STOPPING).catch((error: unknown) => { log.error({ err: error }, 'cannot withdraw readiness'); });
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  // Once stopping, nothing the flow still finishes may make the pod look ready again.
  const report = (state: DriverState) => (stop.signal.aborted ? Promise.resolve() : reporter.report(state));

  await report({ phase: 'Starting', reason: 'Starting', message: `${deps.driver} agent starting` });
  let release: (() => Promise<void>) | undefined;
  let loadedOnce = false;
  let preflight: Promise<void> | undefined;
  try {
    let waiting = false;
    release = await deps.lock(stop.signal, {
      onWaiting: () => {
        if (waiting) return;
        waiting = true;
        // A failure to update the ready file is logged by the reporter; waiting goes on.
        report({ phase: 'WaitingForLock', reason: 'WaitingForLock', message: 'another agent for this driver holds the node lock' }).catch(() => undefined);
      },
      onLost: (error) => {
        lockLost = error;
        log.error({ err: error }, 'node lock lost: another agent may be running; stopping');
        stop.abort(error);
      },
    });
    let failures = 0;
    // While retrying after a failure, the working steps keep showing that failure (see retrying()).
    let lastFailure: DriverState | undefined;
    const reportAttempt = (state: DriverState) => report(lastFailure === undefined ? state : retrying(lastFailure, state, failures + 1));
    while (!stop.signal.aborted) {
      const attempt = await attemptOnce(deps, reportAttempt, stop.signal);
      if (attempt.kind === 'aborted') break;
      if (attempt.kind === 'no-device') {
        await untilAborted(stop.signal);
        break;
      }
      if (attempt.kind === 'loaded') {
        loadedOnce = true;
        failures = 0;
        lastFailure = undefined;
        if (preflight === undefined && deps.preflight !== undefined) {
          // Low priority and abortable: it never delays the loaded driver's checks or a stop.
          preflight = deps.preflight(attempt.built.kernelVersion, stop.signal).catch((error: unknown) => {
            log.error({ err: error }, 'next-kernel preflight stopped');
          });
        }
        const lost = await watchLoaded(deps, attempt.built, stop.signal);
        if (lost === undefined) break;
        lastFailure = await reportFailure(deps, report, 'verify', lost);
        continue;
      }
      failures += 1;
      lastFailure = await reportFailure(deps, report, attempt.step, attempt.error, attempt.hint);
      if (attempt.error instanceof DriverRolledBackError) {
        // The last good driver runs again. Retrying would unload it again for a build that
        // cannot load here: stay rolled back (not ready) until the pod is replaced.
        log.warn('rolled back to the last good driver; not retrying this one until the pod is replaced');
        await untilAborted(stop.signal);
        break;
      }
      const delay = backoffDelay(failures - 1, { ...deps.retry, jitter: RETRY_JITTER, jitterMode: 'shorten' }, deps.random);
      log.info({ attempt: failures, delayMs: delay }, 'retrying after a failure');
      await abortableSleep(delay, stop.signal);
    }
  } catch (error) {
    if (!(error instanceof NodeLockError && stop.signal.aborted)) throw error;
  } finally {
    stop.abort(signal.reason);
    await preflight;
    await shutDown(deps, release, loadedOnce);
  }
  if (lockLost !== undefined) throw new NodeLockError('the node lock was lost while the agent ran', {}, { cause: lockLost });
}

async function attemptOnce(deps: AgentDeps, report: (s: DriverState) => Promise<void>, signal: AbortSignal): Promise<Attempt> {
  const { log, metrics, steps } = deps;
  let step: AgentStep = 'detect';
  let hint: string | undefined;
  try {
    await report({ phase: 'Detecting', reason: 'Detecting', message: 'looking for devices this driver serves' });
    const detection = await steps.detect();
    const deviceCount = detection.devices.length;
    const kernel = detection.host.kernelRelease;
    if (!hasDevices(detection)) {
      log.info({ kernel }, 'no device this driver serves on this node: nothing to do');
      await report({ phase: 'NoDevice', reason: 'NoDevice', message: `no ${deps.driver} device on this node`, deviceCount: 0 });
      return { kind: 'no-device' };
    }
    const { distro, distroRelease } = detection.host;
    log.info({ kernel, distro, distroRelease, devices: detection.devices.map(describeDevice) }, `${deviceCount} device(s) to serve`);

    step = 'build';
    await report({ phase: 'Building', reason: 'Building', message: `building the ${deps.driver} driver for kernel ${kernel}`, deviceCount });
    const built = await timed(
      () => steps.build(detection, signal),
      (seconds, result) => { metrics.observeBuild(seconds, result === undefined ? 'failed' : result.cacheHit ? 'cached' : 'built'); },
    );
    if (signal.aborted) return { kind: 'aborted' };

    step = 'load';
    const competing = competingBoundDrivers(detection.devices, built.modules.map((m) => m.name));
    if (competing.length > 0) {
      hint = `the devices are bound to ${competing.join(', ')} (see MODULE_BLACKLIST)`;
      log.warn({ drivers: competing }, `before loading: ${hint}`);
    }
    const names = built.modules.map((m) => m.name).join(', ');
    await report({ phase: 'Loading', reason: 'Loading', message: `loading ${names} (${built.version}, ${built.cacheHit ? 'from the cache' : 'freshly built'})`, deviceCount });
    const outcome = await timed(
      () => steps.load(built, signal),
      (seconds, result) => { metrics.observeLoad(seconds, result === undefined ? 'failed' : result.changed ? 'loaded' : 'unchanged'); },
    );
    log.info({ changed: outcome.changed }, outcome.summary);

    step = 'verify';
    await report({ phase: 'Verifying', reason: 'Verifying', message: `checking ${names} in /sys/module`, deviceCount });
    const verified = await steps.verify(built);
    await report({
      phase: 'Loaded',
      reason: 'Loaded',
      message: `${deps.driver} ${verified.version} loaded on kernel ${kernel} (${verified.modules.join(', ')}; ${outcome.changed ? 'reloaded' : 'already loaded'})`,
      driverVersion: verified.version,
      loadedDriver: verified.loadedDriver,
      deviceCount,
    });
    return { kind: 'loaded', built };
  } catch (error) {
    if (signal.aborted) return { kind: 'aborted' };
    // The hint explains load failures only (a competing driver keeps the device from our probe).
    return { kind: 'failed', step, error: toError(error), hint: step === 'load' ? hint : undefined };
  }
}

async function reportFailure(
  deps: AgentDeps,
  report: (s: DriverState) => Promise<void>,
  step: AgentStep,
  error: Error,
  hint?: string,
): Promise<DriverState> {
  const { reason, message } = describeFailure(step, error, hint);
  deps.log.error({ err: error, step, reason }, `${step} failed: ${reason}`);
  deps.metrics.countFailure(reason);
  const previous = deps.reporter.current();
  const failed: DriverState = { phase: 'Failed', reason, message, deviceCount: previous.deviceCount };
  await report(failed);
  return failed;
}

const RETRIED_STEPS: ReadonlySet<DriverPhase> = new Set<DriverPhase>(['Detecting', 'Building', 'Loading', 'Verifying']);

/**
 * A working step of a retry after `failure`: the phase is the step's (readiness, labels and
 * metrics follow it), but the reason stays the failure's and the message says what is retried,
 * so the pod condition does not flip back to `Building` between failures. The coordinator sees
 * the failure persist (podRestart.failAfterSeconds counts from its first report) and people see
 * why the driver is not ready. Other states (Loaded, NoDevice, Failed, ...) pass unchanged.
 */
export function retrying(failure: DriverState, state: DriverState, attempt: number): DriverState {
  if (!RETRIED_STEPS.has(state.phase)) return state;
  return { ...state, reason: failure.reason, message: truncateMessage(`${failure.message} (retry ${attempt}: ${state.message})`) };
}

/** Re-verifies a loaded driver until stopped; returns the error if it stops being loaded. */
async function watchLoaded(deps: AgentDeps, built: BuiltDriver, signal: AbortSignal): Promise<Error | undefined> {
  for (;;) {
    await abortableSleep(deps.verifyIntervalMs, signal);
    if (signal.aborted) return undefined;
    try {
      await deps.steps.verify(built);
    } catch (error) {
      return isAborted(signal) ? undefined : toError(error);
    }
  }
}

async function shutDown(deps: AgentDeps, release: (() => Promise<void>) | undefined, loaded: boolean): Promise<void> {
  const { log, reporter } = deps;
  await reporter.report(STOPPING);
  if (!(await reporter.flush(deps.stopFlushMs))) log.warn('the not-ready condition may not have reached the API server');
  if (deps.unloadOnStop && loaded && release !== undefined) {
    // The unload is deliberate: it gets its own signal, bounded by the pod's grace period.
    try {
      await deps.steps.unload(new AbortController().signal);
      await reporter.report({ phase: 'Unloaded', reason: 'Unloaded', message: 'driver unloaded on stop' });
      if (!(await reporter.flush(deps.stopFlushMs))) log.warn('the unloaded state may not have reached the API server');
    } catch (error) {
      log.error({ err: error }, 'cannot unload the driver on stop; leaving it loaded');
    }
  }
  if (deps.onStop !== undefined) {
    await deps.onStop().catch((error: unknown) => { log.warn({ err: error }, 'cannot clean up on stop'); });
  }
  reporter.stop();
  if (release !== undefined) {
    await release().catch((error: unknown) => { log.warn({ err: error }, 'cannot release the node lock'); });
  }
}

/** Read through a call: the signal flips while awaiting, which TypeScript's narrowing cannot see. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/** Runs `run` and reports its duration in seconds with its result (undefined when it threw). */
async function timed<T>(run: () => Promise<T>, observe: (seconds: number, result: T | undefined) => void): Promise<T> {
  const started = performance.now();
  let result: T | undefined;
  try {
    result = await run();
    return result;
  } finally {
    observe((performance.now() - started) / 1000, result);
  }
}

