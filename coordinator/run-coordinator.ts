import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { toError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { createAskAlertGate } from './alerts/ask-alert-gate.ts';
import { startClusterCaches, type CacheKind } from './cluster/cluster-caches.ts';
import type { CoordinatorConfig } from './config.ts';
import { DEFAULT_EVENT_QUEUE, EventQueue } from './execute/event-queue.ts';
import { createKubeClusterWriter } from './execute/kube-cluster-writer.ts';
import { createKubeLeasePort } from './leader/kube-lease-port.ts';
import { runLeaderElection } from './leader/run-leader-election.ts';
import { CoordinatorMetrics } from './metrics/coordinator-metrics.ts';
import { serveHttp } from './metrics/serve-http.ts';
import { createReconciler, type Planner } from './reconcile/reconciler.ts';
import { releaseUnusedHeap } from './release-unused-heap.ts';

export const COORDINATOR_COMPONENT = 'driver-rollout-coordinator';

const mb = (bytes: number): number => Math.round(bytes / 2 ** 20);

/** How long a stopping coordinator goes on sending the Events it raised before it drops the rest. */
const EVENT_DRAIN_MS = 5_000;

export interface CoordinatorHandle {
  /** Port of /metrics, /healthz, /readyz. */
  readonly port: number;
  /** Settles when the coordinator has stopped (after `signal` aborted): lease released, servers closed. */
  readonly done: Promise<void>;
  /** What `done` still waits for (for a report when a stop takes too long); undefined once settled. */
  pendingStop(): string | undefined;
}

/**
 * Wires the coordinator: informer caches (both replicas keep them warm), HTTP endpoints, and
 * the reconcile loop, which runs only while this replica holds the Lease, so only the leader
 * writes. Stops when `signal` aborts.
 */
export async function runCoordinator(
  config: CoordinatorConfig,
  deps: { readonly kc: KubeConfig; readonly logger: Logger; readonly plan: Planner },
  signal: AbortSignal,
): Promise<CoordinatorHandle> {
  const { kc, logger } = deps;
  const metrics = new CoordinatorMetrics();
  let stopStage: 'election' | 'events' | 'caches' | 'http' | undefined = 'election';
  let isLeading = false;
  let onChange: (kind: CacheKind, object?: KubernetesObject) => void = () => undefined;
  const caches = startClusterCaches({ kc, namespaces: config.namespaces, logger, onChange: (kind, object) => { onChange(kind, object); } });
  const apiWriter = createKubeClusterWriter(kc, { component: COORDINATOR_COMPONENT, instance: config.identity });
  let dropping = false;
  const events = new EventQueue((event) => apiWriter.emitEvent(event), {
    ...DEFAULT_EVENT_QUEUE,
    now: () => new Date(),
    onDropped: (event, why) => {
      metrics.countEventDropped(why);
      if (why === 'full' && !dropping) logger.warn({ capacity: DEFAULT_EVENT_QUEUE.capacity, reason: event.reason, target: event.target.name }, 'too many Events waiting; dropping the oldest Normal ones');
      dropping = why === 'full';
    },
    onFailed: (event, error) => {
      logger.warn({ target: `${event.target.kind}/${event.target.name}`, reason: event.reason, err: toError(error) }, 'could not record event');
    },
    onSize: (size) => {
      metrics.setEventsQueued(size);
      if (size === 0) dropping = false;
    },
  });
  const reconciler = createReconciler({
    caches,
    // Events go out through the queue, a few at a time, behind the writes a wave waits for.
    writer: {
      ...apiWriter,
      emitEvent: (event) => {
        events.emit(event);
        return Promise.resolve();
      },
    },
    plan: deps.plan,
    metrics,
    logger,
    askAlertGate: createAskAlertGate(kc),
  });
  onChange = (kind, object) => {
    if (reconciler.isRelevant(kind, object)) reconciler.trigger();
  };
  void caches.synced.then(() => {
    const before = process.memoryUsage.rss();
    const started = performance.now();
    releaseUnusedHeap();
    logger.info({ rssMbBefore: mb(before), rssMbAfter: mb(process.memoryUsage.rss()), gcMs: Math.round(performance.now() - started) }, 'caches synced; unused heap released');
  });
  const http = await serveHttp({ registry: metrics.registry, notReadyReason: () => caches.notSyncedReason(), logger }, config.metricsPort, signal);
  logger.info({ port: http.port, identity: config.identity, namespaces: config.namespaces }, 'coordinator started');
  const election = runLeaderElection(
    {
      port: createKubeLeasePort(kc, config.leaseNamespace, config.leaseName),
      identity: config.identity,
      leaseDurationSeconds: config.leaseDurationSeconds,
      renewDeadlineMs: config.renewDeadlineMs,
      retryPeriodMs: config.retryPeriodMs,
      logger,
      lead: async (leading) => {
        metrics.setLeader(true);
        isLeading = true;
        try {
          await reconciler.run(leading);
        } finally {
          isLeading = false;
          metrics.setLeader(false);
        }
      },
    },
    signal,
  );
  const done = (async () => {
    await election;
    stopStage = 'events';
    const dropped = await events.close(EVENT_DRAIN_MS);
    if (dropped > 0) logger.warn({ dropped }, 'stopped with Events not sent');
    stopStage = 'caches';
    await caches.stop();
    stopStage = 'http';
    await http.closed;
    stopStage = undefined;
  })();
  const pendingStop = (): string | undefined => {
    switch (stopStage) {
      case 'election':
        return isLeading ? 'leader election: the leader\'s work (reconcile loop) has not returned' : 'leader election has not returned (not leading)';
      case 'events':
        return 'sending the Events still queued';
      case 'caches':
        return 'stopping the informer caches';
      case 'http':
        return 'closing the HTTP server';
      default:
        return undefined;
    }
  };
  return { port: http.port, done, pendingStop };
}
