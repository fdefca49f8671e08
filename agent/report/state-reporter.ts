import { apiErrorMessage, apiStatusCode } from '../../shared/kube/api-error.ts';
import type { Logger } from '../../shared/logger.ts';
import type { DriverKeys } from '../../shared/keys.ts';
import type { AgentMetrics } from './agent-metrics.ts';
import { isReady, type DriverState } from './driver-state.ts';
import { createLatestWinsWriter, type LatestWinsWriter } from './latest-wins-writer.ts';
import { DRIVER_LOADED_EVENT, type NodeEventInput } from './node-events.ts';
import { nodeAnnotationsFor } from './node-annotations.ts';
import { nodeLabelsFor, type NodeMetadataPatch } from './node-labels.ts';
import { removeReadyFile, writeReadyFile } from './ready-file.ts';
import type { Readiness } from './status-server.ts';

/** Where the state goes beyond the process. Each is optional so the flow runs without a cluster in unit tests. */
export interface StateSinks {
  readonly writePodCondition?: (state: DriverState) => Promise<void>;
  /** The agent's node labels and its loaded-driver annotation, in one patch. */
  readonly writeNodeMetadata?: (patch: NodeMetadataPatch) => Promise<void>;
  readonly recordNodeEvent?: (event: NodeEventInput) => Promise<void>;
}

export interface StateReporterOptions {
  readonly driver: string;
  readonly keys: DriverKeys;
  readonly readyFilePath: string;
  readonly metrics: AgentMetrics;
  readonly sinks: StateSinks;
  readonly log: Logger;
  readonly now: () => Date;
  /** Delay before the n-th retry of a failed API write. */
  readonly retryDelayMs: (attempt: number) => number;
}

export interface StateReporter {
  /**
   * Shows `state` everywhere. Resolves once the local views (/readyz, ready file, metrics) show
   * it; API writes continue in the background (see `flush`). Calls are applied in order.
   */
  report(state: DriverState): Promise<void>;
  current(): DriverState;
  readiness(): Readiness;
  /** Waits for the API writes of every state reported so far, at most `timeoutMs`. */
  flush(timeoutMs: number): Promise<boolean>;
  stop(): void;
}

/**
 * One state, many views, and they never disagree about readiness in the unsafe direction:
 * becoming ready writes the ready file before /readyz says 200 and before the condition and
 * labels are sent; becoming not ready makes /readyz say 503 and sends the condition before the
 * file is removed. The pod condition and node labels follow through
 * latest-wins writers, so a slow or unreachable API server never blocks the flow or SIGTERM.
 */
export function createStateReporter(options: StateReporterOptions): StateReporter {
  const { log, sinks } = options;
  let current: DriverState = { phase: 'Starting', reason: 'Starting', message: 'agent starting' };
  let local: Promise<void> = Promise.resolve();
  const writers: Pick<LatestWinsWriter<unknown>, 'flush' | 'stop'>[] = [];

  const writerFor = <T>(what: string, write: ((value: T) => Promise<void>) | undefined) => {
    if (write === undefined) return undefined;
    const w = createLatestWinsWriter<T>(write, {
      retryDelayMs: options.retryDelayMs,
      onError: (error, attempt) => { log.warn({ attempt, status: apiStatusCode(error), why: apiErrorMessage(error) }, `cannot write the ${what}; retrying`); },
    });
    writers.push(w);
    return w;
  };
  const condition = writerFor('pod readiness condition', sinks.writePodCondition);
  const nodeMetadata = writerFor('node labels and annotations', sinks.writeNodeMetadata);

  let latest = 0;

  /** Runs in report order; a ready state superseded before its turn is skipped entirely. */
  async function applyLocally(seq: number, state: DriverState): Promise<void> {
    if (seq !== latest) return;
    options.metrics.setPhase(state.phase);
    if (state.deviceCount !== undefined) options.metrics.setDevices(state.deviceCount);
    if (isReady(state)) {
      await writeReadyFile(options.readyFilePath, readyFileContent(options.driver, state, options.now()));
      if (seq === latest) current = state;
      else await removeReadyFile(options.readyFilePath);
    } else {
      await removeReadyFile(options.readyFilePath);
    }
  }

  return {
    report(state) {
      const previous = current;
      if (previous.phase !== state.phase || previous.message !== state.message) {
        // The first line only: a failure's full text (a compiler's output) is logged with its error.
        log.info({ phase: state.phase, reason: state.reason, from: previous.phase }, state.message.split('\n', 1)[0] ?? '');
      }
      const seq = ++latest;
      if (!isReady(state)) current = state;
      const done = local.then(() => applyLocally(seq, state));
      local = done.catch((error: unknown) => { log.error({ err: error }, 'cannot update the ready file'); });
      const publish = () => {
        condition?.set(state);
        nodeMetadata?.set({ labels: nodeLabelsFor(options.keys, state), annotations: nodeAnnotationsFor(options.keys, state) });
      };
      // Readiness is withdrawn everywhere at once, but granted to the API only after the local
      // views show it, and only if no newer state was reported meanwhile.
      if (isReady(state)) void done.then(() => { if (seq === latest) publish(); }, () => undefined);
      else publish();
      recordEventFor(previous, state);
      return done;
    },
    current: () => current,
    readiness: () => ({ ready: isReady(current), detail: `${current.reason}: ${current.message}` }),
    async flush(timeoutMs) {
      const results = await Promise.all(writers.map((w) => w.flush(timeoutMs)));
      return results.every(Boolean);
    },
    stop() {
      for (const w of writers) w.stop();
    },
  };

  function recordEventFor(previous: DriverState, state: DriverState): void {
    const record = sinks.recordNodeEvent;
    if (record === undefined) return;
    let event: NodeEventInput | undefined;
    if (state.phase === 'Failed') event = { type: 'Warning', reason: state.reason, message: state.message };
    else if (state.phase === 'Loaded' && previous.phase !== 'Loaded') event = { type: 'Normal', reason: DRIVER_LOADED_EVENT, message: state.message };
    if (event === undefined) return;
    record(event).catch((error: unknown) => {
      log.warn({ reason: event.reason, status: apiStatusCode(error), why: apiErrorMessage(error) }, 'cannot record the node event');
    });
  }
}

function readyFileContent(driver: string, state: DriverState, now: Date): Record<string, unknown> {
  return {
    driver,
    phase: state.phase,
    reason: state.reason,
    message: state.message,
    ...(state.driverVersion === undefined ? {} : { driverVersion: state.driverVersion }),
    ...(state.deviceCount === undefined ? {} : { deviceCount: state.deviceCount }),
    since: now.toISOString(),
  };
}
