import { toError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { backoffDelay, type BackoffPolicy } from '../shared/backoff.ts';
import { DEFAULT_BACKOFF } from './default-backoff.ts';
import { abortReason } from '../shared/abortable-sleep.ts';
import type { Clock } from './clock.ts';
import { describeSafeLoadWait, isSafeLoadCleared } from './describe-safe-load-wait.ts';
import { GateAbortedError, NodeAccessError, NodeDeletedError } from './errors.ts';
import type { NodeApi, NodeView } from './node-api.ts';
import { retryTransient } from './retry-transient.ts';

/** How often the gate logs what it waits for and what it sees. */
export const STATUS_INTERVAL_MS = 30_000;

/** A watch that ends sooner than this counts as a failure for backoff (guards against hot loops). */
const SHORT_WATCH_MS = 1_000;

export interface WaitForSafeLoadOptions {
  readonly api: NodeApi;
  readonly nodeName: string;
  readonly annotationKey: string;
  /** The driver's upgrade-state label, reported in the status log; undefined when not known. */
  readonly stateLabelKey: string | undefined;
  readonly signal: AbortSignal;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly statusIntervalMs?: number;
  readonly backoff?: BackoffPolicy;
  readonly random?: () => number;
}

export interface SafeLoadCleared {
  readonly waitedMs: number;
  /** The node as last seen, with the annotation gone or empty. */
  readonly node: NodeView;
}

/**
 * Resolves as soon as the safe-load annotation on our own Node is gone or empty.
 *
 * List-then-watch on that one node (`fieldSelector=metadata.name=<node>`), so the change is seen
 * as a watch event, not on a polling tick. Streams that end (server timeout, dropped connection,
 * API server restart) are re-opened from the last resourceVersion seen; a 410 Gone or a failed
 * connection re-lists first, with backoff. Throws NodeAccessError (denied, not found),
 * NodeDeletedError, or GateAbortedError when `signal` aborts (SIGTERM, overall timeout).
 */
export async function waitForSafeLoad(options: WaitForSafeLoadOptions): Promise<SafeLoadCleared> {
  const { clock, signal } = options;
  const startedAt = clock.now();
  const seen: WaitState = { node: undefined, watchOpen: false };
  const reporter = new AbortController();
  const reporting = reportPeriodically(options, seen, startedAt, AbortSignal.any([signal, reporter.signal]));
  try {
    const node = await listAndWatch(options, seen);
    return { waitedMs: clock.now() - startedAt, node };
  } catch (thrown) {
    if (!signal.aborted || thrown instanceof NodeAccessError) throw thrown;
    const report = describeSafeLoadWait({ ...options, node: seen.node, waitedMs: clock.now() - startedAt, watchOpen: seen.watchOpen });
    const reason = abortReason(signal);
    throw new GateAbortedError(
      `stopped (${reason.message}) while waiting for annotation ${options.annotationKey} to be removed from node ${options.nodeName}; ` +
        `node cordoned: ${String(report.cordoned)}, upgrade state: ${String(report.upgradeState)}`,
      { ...report },
      reason,
    );
  } finally {
    reporter.abort();
    await reporting;
  }
}

interface WaitState {
  node: NodeView | undefined;
  watchOpen: boolean;
}

async function listAndWatch(options: WaitForSafeLoadOptions, seen: WaitState): Promise<NodeView> {
  const { api, nodeName, annotationKey, signal, logger } = options;
  const policy = options.backoff ?? DEFAULT_BACKOFF;
  let failures = 0;
  for (;;) {
    const listing = await retryTransient(() => api.listNode(nodeName, signal), { ...options, what: `listing node "${nodeName}"` });
    if (listing.node === undefined) {
      throw new NodeAccessError({ node: nodeName, verb: 'list', resource: 'nodes', problem: 'not-found', status: 404, reason: 'no node with this name' });
    }
    seen.node = listing.node;
    if (isSafeLoadCleared(listing.node, annotationKey)) return listing.node;
    let resourceVersion = listing.resourceVersion;
    // Watch until the annotation clears, or until the stream needs a re-list (410, error).
    for (;;) {
      const openedAt = options.clock.now();
      const outcome = await watchOnce(options, seen, resourceVersion);
      if (outcome.kind === 'cleared') return outcome.node;
      resourceVersion = outcome.resourceVersion;
      const shortLived = options.clock.now() - openedAt < SHORT_WATCH_MS && !outcome.progressed;
      failures = outcome.kind === 'ended' && !shortLived ? 0 : failures + 1;
      if (outcome.kind === 'ended' && failures === 0) continue;
      const delayMs = backoffDelay(failures - 1, policy, options.random ?? Math.random);
      logger.warn({ node: nodeName, reason: outcome.reason, retryInMs: delayMs }, 'node watch interrupted; re-watching');
      await options.clock.sleep(delayMs, signal);
      if (outcome.kind === 'relist') break;
    }
  }
}

type WatchOutcome =
  | { kind: 'cleared'; node: NodeView }
  /** The stream ended cleanly: re-watch from `resourceVersion`. */
  | { kind: 'ended'; resourceVersion: string; progressed: boolean; reason: string }
  /** 410 Gone or a failed connection: list again before watching. */
  | { kind: 'relist'; resourceVersion: string; progressed: boolean; reason: string };

async function watchOnce(options: WaitForSafeLoadOptions, seen: WaitState, from: string): Promise<WatchOutcome> {
  const { api, nodeName, annotationKey, signal } = options;
  let resourceVersion = from;
  let progressed = false;
  seen.watchOpen = true;
  options.logger.debug({ node: nodeName, resourceVersion }, 'watching node');
  try {
    for await (const event of api.watchNode(nodeName, resourceVersion, signal)) {
      switch (event.type) {
        case 'ADDED':
        case 'MODIFIED':
          seen.node = event.node;
          resourceVersion = event.node.resourceVersion;
          progressed = true;
          if (isSafeLoadCleared(event.node, annotationKey)) return { kind: 'cleared', node: event.node };
          break;
        case 'DELETED':
          throw new NodeDeletedError(nodeName);
        case 'BOOKMARK':
          resourceVersion = event.resourceVersion;
          progressed = true;
          break;
        case 'ERROR':
          // 410: our resourceVersion was compacted away. Anything else: the stream is unusable.
          return { kind: 'relist', resourceVersion, progressed, reason: `watch error ${event.code}: ${event.message}` };
      }
    }
    return { kind: 'ended', resourceVersion, progressed, reason: 'watch closed by the server' };
  } catch (thrown) {
    if (thrown instanceof NodeAccessError || thrown instanceof NodeDeletedError || signal.aborted) throw thrown;
    return { kind: 'relist', resourceVersion, progressed, reason: toError(thrown).message };
  } finally {
    seen.watchOpen = false;
  }
}

async function reportPeriodically(options: WaitForSafeLoadOptions, seen: WaitState, startedAt: number, signal: AbortSignal): Promise<void> {
  const interval = options.statusIntervalMs ?? STATUS_INTERVAL_MS;
  try {
    for (;;) {
      await options.clock.sleep(interval, signal);
      const report = describeSafeLoadWait({ ...options, node: seen.node, waitedMs: options.clock.now() - startedAt, watchOpen: seen.watchOpen });
      options.logger.info(report, 'waiting for safe load');
    }
  } catch {
    // Aborted: the wait is over.
  }
}
