/**
 * What the API server's audit log (JSON lines, one user's requests) says about a rollout: the
 * requests by verb and resource, and where the time went per node, from the coordinator's own
 * writes: the patch that takes the node out of service (an upgrading state or the cordon; the
 * audit policy logs node writes at level Request for their bodies), the deletion of the node's
 * driver pod, and its last write to the node (back in upgrade-done, uncordoned).
 */
import { UPGRADING_STATES } from '../../coordinator/plan/pool-capacity.ts';
import { quantile } from './stats.ts';

/** The fields of an audit event (audit.k8s.io/v1 Event) read here. */
export interface AuditEntry {
  readonly verb?: string;
  readonly stage?: string;
  readonly objectRef?: { readonly resource?: string; readonly subresource?: string; readonly name?: string };
  readonly requestReceivedTimestamp?: string;
  readonly stageTimestamp?: string;
  /** Level Request and above: the patch body. */
  readonly requestObject?: { readonly metadata?: { readonly labels?: Readonly<Record<string, string | null>> }; readonly spec?: { readonly unschedulable?: boolean } };
}

export interface RolloutAuditSummary {
  /** Completed requests by verb, e.g. `patch`, and Events apart as `create:events`. */
  readonly byVerb: Readonly<Record<string, number>>;
  /** Completed requests by `verb resource[/subresource]`, e.g. `patch nodes`, `patch driverrollouts/status`. */
  readonly byVerbAndResource: Readonly<Record<string, number>>;
  /** Seconds from the change to the first node taken out of service. */
  readonly firstStartSeconds: number;
  /** Per node, median seconds: out of service → driver pod deleted; deleted → last write. */
  readonly startToDeleteSeconds: number;
  readonly deleteToDoneSeconds: number;
  /**
   * The same split where the replacement turned Ready (`replacementReadyAt`): deleted →
   * replacement Ready is the cluster's part (DaemonSet controller, scheduler, kubelet/KWOK, API
   * server), Ready → last write the coordinator's. NaN without Ready times.
   */
  readonly deleteToReadySeconds: number;
  readonly readyToDoneSeconds: number;
  /** Median seconds from a node's last write to the next node taken out of service in its slot. */
  readonly handoffSeconds: number;
  /** The API server's time per coordinator write (received → response complete), median and p90, ms. */
  readonly writeLatencyMs: { readonly median: number; readonly p90: number };
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

/**
 * `entries` from after the change (epoch ms `changedAtMs`); `podNodes` maps each old driver
 * pod's name to its node; `slots` is maxUnavailable in nodes (the k-th node to start takes the
 * slot of the (k − slots)-th to finish); `stateLabel` the driver's upgrade-state label;
 * `replacementReadyAt` (optional) when each node's new driver pod was first seen Ready (epoch ms).
 */
export function summarizeRolloutAudit(
  entries: readonly AuditEntry[],
  options: { changedAtMs: number; podNodes: ReadonlyMap<string, string>; slots: number; stateLabel: string; replacementReadyAt?: ReadonlyMap<string, number> },
): RolloutAuditSummary {
  const complete = entries.filter((e) => e.stage === 'ResponseComplete' && e.verb !== undefined);
  const times = nodeTimes(complete, options.podNodes, options.stateLabel);
  const latencies = complete.filter((e) => WRITE_VERBS.has(e.verb ?? '')).map((e) => Date.parse(e.stageTimestamp ?? '') - Date.parse(e.requestReceivedTimestamp ?? '')).filter(Number.isFinite);
  const toDelete: number[] = [];
  const afterDelete: number[] = [];
  const toReady: number[] = [];
  const afterReady: number[] = [];
  for (const [node, at] of times.deleted) {
    const start = times.start.get(node);
    const end = times.last.get(node);
    const ready = options.replacementReadyAt?.get(node);
    if (start !== undefined) toDelete.push((at - start) / 1000);
    if (end !== undefined) afterDelete.push((end - at) / 1000);
    if (ready !== undefined) toReady.push((ready - at) / 1000);
    if (ready !== undefined && end !== undefined) afterReady.push((end - ready) / 1000);
  }
  const starts = [...times.start.values()].sort((a, b) => a - b);
  const ends = [...times.last.values()].sort((a, b) => a - b);
  const handoffs: number[] = [];
  for (let k = options.slots; k < starts.length; k++) {
    const freed = ends[k - options.slots];
    const taken = starts[k];
    if (freed !== undefined && taken !== undefined) handoffs.push((taken - freed) / 1000);
  }
  return {
    ...countRequests(complete),
    firstStartSeconds: starts[0] === undefined ? Number.NaN : (starts[0] - options.changedAtMs) / 1000,
    startToDeleteSeconds: median(toDelete),
    deleteToDoneSeconds: median(afterDelete),
    deleteToReadySeconds: median(toReady),
    readyToDoneSeconds: median(afterReady),
    handoffSeconds: median(handoffs),
    writeLatencyMs: { median: median(latencies), p90: quantile(latencies.sort((a, b) => a - b), 0.9) },
  };
}

function countRequests(entries: readonly AuditEntry[]): Pick<RolloutAuditSummary, 'byVerb' | 'byVerbAndResource'> {
  const byVerb: Record<string, number> = {};
  const byVerbAndResource: Record<string, number> = {};
  for (const e of entries) {
    const verb = e.verb ?? '';
    const resource = e.objectRef?.resource ?? '(none)';
    const key = `${verb} ${resource}${e.objectRef?.subresource === undefined ? '' : `/${e.objectRef.subresource}`}`;
    byVerb[verb] = (byVerb[verb] ?? 0) + 1;
    if (verb === 'create' && resource === 'events') byVerb['create:events'] = (byVerb['create:events'] ?? 0) + 1;
    byVerbAndResource[key] = (byVerbAndResource[key] ?? 0) + 1;
  }
  return { byVerb, byVerbAndResource };
}

/** Per node (epoch ms): taken out of service, driver pod deleted, last write. */
function nodeTimes(entries: readonly AuditEntry[], podNodes: ReadonlyMap<string, string>, stateLabel: string): { start: Map<string, number>; deleted: Map<string, number>; last: Map<string, number> } {
  const start = new Map<string, number>();
  const deleted = new Map<string, number>();
  const last = new Map<string, number>();
  for (const e of entries) {
    const name = e.objectRef?.name;
    const at = Date.parse(e.requestReceivedTimestamp ?? '');
    if (name === undefined || !Number.isFinite(at)) continue;
    if (e.objectRef?.resource === 'nodes' && WRITE_VERBS.has(e.verb ?? '')) {
      if (!start.has(name) && takesOutOfService(e, stateLabel)) start.set(name, at);
      last.set(name, at);
    }
    const node = e.objectRef?.resource === 'pods' && e.verb === 'delete' ? podNodes.get(name) : undefined;
    if (node !== undefined && !deleted.has(node)) deleted.set(node, at);
  }
  return { start, deleted, last };
}

function median(values: number[]): number {
  return quantile(values.sort((a, b) => a - b), 0.5);
}

/** A node patch that stores an upgrading state or cordons (labelling upgrade-required while a node waits for a slot does not). */
function takesOutOfService(e: AuditEntry, stateLabel: string): boolean {
  const state = e.requestObject?.metadata?.labels?.[stateLabel];
  return e.requestObject?.spec?.unschedulable === true || (typeof state === 'string' && (UPGRADING_STATES as ReadonlySet<string>).has(state));
}

/** Parses audit log text (JSON lines); blank lines are skipped. */
export function parseAuditLines(text: string): AuditEntry[] {
  return text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as AuditEntry);
}
