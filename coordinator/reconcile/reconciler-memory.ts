import type { Logger } from '../../shared/logger.ts';
import type { AskAlertGate } from '../alerts/ask-alert-gate.ts';
import type { ClusterWriter } from '../execute/cluster-writer.ts';
import { NodePlansInFlight } from '../execute/node-plans-in-flight.ts';
import { AlertGatePollers } from './alert-gate-pollers.ts';
import { DeletedPods } from './deleted-pods.ts';
import { EvictionMemory } from './eviction-memory.ts';
import { KnownRollouts } from './known-rollouts.ts';
import { PodRelevance } from './pod-relevance.ts';
import { RolloutStatusWriter } from './rollout-status-writer.ts';
import { SpecParseCache } from './spec-parse-cache.ts';
import { WakeSignal } from './wake-signal.ts';
import { WrittenNodes } from './written-nodes.ts';

/**
 * The loop's memory between passes, as one record: every part a small class with its own tests.
 * None of it survives a restart, and none of it decides anything a restart would change: it is
 * read-your-writes overlays, caches of work already done, and the writes still under way.
 */
export interface ReconcilerMemory {
  /** Nodes as this replica last wrote them, until the cache shows them; their echoes wake nothing. */
  readonly writtenNodes: WrittenNodes;
  /** Evictions refused (429) by pod, for the planner's drain reasons. */
  readonly evictions: EvictionMemory;
  /** Pods this replica deleted or evicted, counted terminating until the cache shows them. */
  readonly deletedPods: DeletedPods;
  /** Parsed DriverRollout specs, parsed again only when the generation changes. */
  readonly specs: SpecParseCache;
  /** Rollouts with metrics, so the metrics of a deleted one are dropped. */
  readonly known: KnownRollouts;
  /** Which pods can matter to a plan (those on managed nodes, or owned by a DaemonSet). */
  readonly relevance: PodRelevance;
  /** Each rollout's status as last written; status writes beside the passes, the latest last. */
  readonly statuses: RolloutStatusWriter;
  /** Node plans carried out beside the passes, and the raising writes not answered yet. */
  readonly inFlight: NodePlansInFlight;
  /** Events about rollouts (Halted) sent beside the passes. */
  readonly eventsBeside: Set<Promise<void>>;
  /** Canary rollbacks made in this term (`<namespace>/<daemonset>:<from hash>`), so each is sent once. */
  readonly rollbacks: Set<string>;
  /** When the next pass runs: on a change (debounced), or at the earliest deadline a plan named. */
  readonly wake: WakeSignal;
  /** The alert gates' polls and last readings (this term); null when the reconciler cannot ask Prometheus. */
  readonly alertGates: AlertGatePollers | null;
}

export interface ReconcilerMemoryOptions {
  readonly writer: ClusterWriter;
  readonly now: () => number;
  readonly debounceMs: number;
  /** Nodes the executor works on at once. */
  readonly concurrency: number;
  readonly statusMinIntervalMs?: number | undefined;
  readonly askAlertGate?: AskAlertGate | undefined;
  readonly logger: Logger;
}

export function createReconcilerMemory(options: ReconcilerMemoryOptions): ReconcilerMemory {
  const wake = new WakeSignal(options.debounceMs);
  const ask = options.askAlertGate;
  return {
    writtenNodes: new WrittenNodes(),
    evictions: new EvictionMemory(),
    deletedPods: new DeletedPods(),
    specs: new SpecParseCache(),
    known: new KnownRollouts(),
    relevance: new PodRelevance(),
    statuses: new RolloutStatusWriter(options.writer, { now: options.now, ...(options.statusMinIntervalMs === undefined ? {} : { minIntervalMs: options.statusMinIntervalMs }) }),
    inFlight: new NodePlansInFlight(options.concurrency),
    eventsBeside: new Set(),
    rollbacks: new Set(),
    wake,
    alertGates: ask === undefined ? null : new AlertGatePollers({ ask, logger: options.logger, now: options.now, onChange: () => { wake.trigger(); } }),
  };
}
