/**
 * A whole rollout on the real control plane (test/bed, profile `full`): N KWOK nodes, a driver
 * DaemonSet (OnDelete) whose pods the real DaemonSet controller recreates, KWOK making each new
 * pod Ready after the reload delay, and the coordinator as its own process (coordinator/main.ts)
 * with a ServiceAccount token, so the API server's audit log can attribute requests to it.
 *
 * Per case: wall time from the template change to the last node back in upgrade-done; the ideal
 * (waves × the measured time for one driver pod to be deleted, recreated and become Ready, delay
 * included); their ratio; controller overhead per wave ((wall − ideal) / waves); the cluster's
 * floor for a wave (a wave's driver pods deleted at once with no coordinator running, until all
 * are replaced and Ready) and the wave time above that floor (wall / waves − floor: what the
 * coordinator adds to what the cluster itself needs on this machine); with no reload delay, the
 * cluster's pipelined floor (every driver pod replaced `allowed` at a time, no coordinator, a slot
 * handed on as soon as a replacement is Ready) and the wave time above it; the
 * coordinator's API requests per upgraded node by verb (audit log) and the cluster's
 * apiserver_request_total by verb during the rollout; new TCP connections from the coordinator
 * to the API server during the rollout; the most nodes out of service at once (must never
 * exceed maxUnavailable); the coordinator's CPU time and RSS; the most nodes NotReady at once (a
 * test bed whose heartbeats fall behind shows here). With label churn (`labelChurnSeconds`), a
 * separate process (bench/run-label-churn.ts) rewrites NFD- and GFD-style labels of every node
 * from before the floors are sampled until the rollout ends: the coordinator's refused cordon
 * writes, its node re-reads and retries, and whether every label the churn stored is still on
 * its node.
 */
import { AppsV1Api, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COORDINATOR_ALLOCATOR_ENV } from '../../coordinator/allocator-env.ts';
import { ACTION_FAILED_MESSAGE } from '../../coordinator/execute/execute-plan.ts';
import { UPGRADING_STATES } from '../../coordinator/plan/pool-capacity.ts';
import { DRIVER_ROLLOUT_GROUP, DRIVER_ROLLOUT_PLURAL, DRIVER_ROLLOUT_VERSION } from '../../coordinator/policy/driver-rollout-spec.ts';
import { driverKeys, KWOK_NODE_ANNOTATION } from '../../shared/keys.ts';
import { apiErrorMessage, apiStatusCode } from '../../shared/kube/api-error.ts';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { shareApiConnections } from '../../shared/kube/share-api-connections.ts';
import { floorWaves, SINGLE_SAMPLES } from '../lib/floor-waves.ts';
import { SlotPipeline } from '../lib/slot-pipeline.ts';
import { sampleApiConnections } from '../../test/bed/api-connection-sampler.ts';
import { freePort } from '../../test/bed/free-port.ts';
import { startControlPlane, type ControlPlane } from '../../test/bed/control-plane.ts';
import { keepWatching } from '../../test/bed/keep-watching.ts';
import { kwokLeaseWorkers, nodeHeartbeatFor, PATIENT_NODE_HEARTBEAT, type NodeHeartbeat } from '../../test/bed/node-heartbeat.ts';
import { startProgram, type ProgramProcess } from '../../test/bed/program-process.ts';
import { installCrd } from '../../test/integration/coordinator/harness.ts';
import { readApiServerMetrics } from '../lib/api-server-metrics.ts';
import { lostChurnLabels } from '../lib/label-churn.ts';
import { round } from '../lib/machine.ts';
import { parseAuditLines, summarizeRolloutAudit } from '../lib/rollout-audit.ts';
import { quantile } from '../lib/stats.ts';

/**
 * Set to a directory, the coordinator of every rollout writes a V8 CPU profile there (node
 * --cpu-prof; it is stopped gracefully so that the profile is written). Profiling costs CPU:
 * figures from such runs are for finding where the time goes, not for comparing.
 */
export const COORDINATOR_CPU_PROFILE_ENV = 'BENCH_COORDINATOR_CPU_PROFILE';

/** The coordinator's extra environment, and the signal that stops it, with or without a profile asked for. */
function coordinatorProfiling(): { readonly env: Readonly<Record<string, string>>; readonly stop: NodeJS.Signals } {
  const dir = process.env[COORDINATOR_CPU_PROFILE_ENV];
  if (dir === undefined || dir === '') return { env: {}, stop: 'SIGKILL' };
  // A profiled coordinator writes its profile on a graceful exit only.
  return { env: { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir}` }, stop: 'SIGTERM' };
}

export interface RolloutCase {
  readonly nodes: number;
  /** maxUnavailable as a percentage of the nodes, e.g. 10. */
  readonly unavailablePercent: number;
  /** KWOK's delay before a new driver pod runs and turns Ready (the driver reload). */
  readonly reloadSeconds: number;
  /**
   * Seconds between two rewrites of one node's labels by each of the two churn writers (NFD- and
   * GFD-style, bench/lib/label-churn.ts), the writers half an interval apart; 0: no churn.
   */
  readonly labelChurnSeconds: number;
}

/** What the label churn did during a case, and what of it the nodes still carry at the end. */
export interface LabelChurnMeasurement {
  readonly intervalSeconds: number;
  readonly seconds: number;
  /** Writes sent, stored (2xx), failed, and skipped (the writer's previous write of that node still under way). */
  readonly sent: number;
  readonly stored: number;
  readonly failed: number;
  readonly skipped: number;
  /** Stored writes per second over the churn's run. */
  readonly storedPerSecond: number;
  /** Labels whose last stored value a node no longer carries (`writer/node/key`): must be none. */
  readonly lostLabels: number;
  readonly lostExamples: readonly string[];
  readonly firstErrors: readonly string[];
}

export interface RolloutMeasurement {
  readonly case: RolloutCase;
  readonly wallSeconds: number;
  readonly singleReplaceSeconds: number;
  readonly singleReplaceSamples: readonly number[];
  readonly waves: number;
  readonly idealSeconds: number;
  readonly ratio: number;
  readonly overheadPerWaveSeconds: number;
  /** A wave's driver pods deleted at once, no coordinator running: seconds until all are replaced and Ready (median of the samples). */
  readonly waveFloorSeconds: number;
  readonly waveFloorSamples: readonly number[];
  /** wall / waves − waveFloorSeconds: the wave time the coordinator adds to the cluster's own. */
  readonly aboveFloorPerWaveSeconds: number;
  /**
   * The cluster's pipelined floor, per wave: every driver pod replaced `allowed` at a time with
   * no coordinator, each freed slot handed on as soon as a replacement is seen Ready (a watch and
   * a delete per node, no other write). NaN where not measured (a reload delay, or one wave).
   */
  readonly pipelineFloorPerWaveSeconds: number;
  /** wall / waves − pipelineFloorPerWaveSeconds. NaN where not measured. */
  readonly abovePipelineFloorPerWaveSeconds: number;
  /**
   * The same with each node cordoned (stored) before its driver pod is deleted and uncordoned
   * (stored) before its slot is handed on: the least a controller that keeps new workloads off
   * a node while its driver restarts must do, two more round trips per node. NaN where not measured.
   */
  readonly cordonPipelineFloorPerWaveSeconds: number;
  /** wall / waves − cordonPipelineFloorPerWaveSeconds: what the coordinator adds to that least. NaN where not measured. */
  readonly aboveCordonPipelineFloorPerWaveSeconds: number;
  /** Seconds after the last node was done until the coordinator's last queued Event was sent. */
  readonly eventsSentAfterSeconds: number;
  /** The coordinator's requests during the rollout, by verb (audit log), per upgraded node. */
  readonly requestsPerNode: Readonly<Record<string, number>>;
  /** The same by `verb resource[/subresource]`. */
  readonly requestsPerNodeByResource: Readonly<Record<string, number>>;
  readonly writesPerNode: number;
  readonly eventsPerNode: number;
  /**
   * Cordon and uncordon writes refused because a field they were made from changed since the
   * node was read (422, a failed JSON Patch test), per upgraded node
   * (driver_rollout_node_write_conflicts_total); each is one more read and one more patch,
   * counted in writesPerNode and requestsPerNode too.
   */
  readonly conflictsPerNode: number;
  /**
   * Node reads by the coordinator during the rollout per upgraded node (audit: `get nodes`): a
   * node is read only after a refused cordon write, which is tried again on what was read.
   */
  readonly retriesPerNode: number;
  /** Node write lists that failed and were planned afresh by a later pass (refused on every try, or another error), per upgraded node. */
  readonly replannedPerNode: number;
  /** The coordinator's CPU time (user + system, its process_cpu_seconds_total) from the change to the last node done. */
  readonly coordinatorCpuSeconds: number;
  /** The most nodes NotReady at once during the rollout, as the bench's node watch saw them. */
  readonly mostNotReady: number;
  /** The test bed's node heartbeat for this case (test/bed/node-heartbeat.ts). */
  readonly heartbeat: NodeHeartbeat;
  /** Undefined without label churn. */
  readonly labelChurn: LabelChurnMeasurement | undefined;
  /** Every client's requests during the rollout (apiserver_request_total), by verb. */
  readonly clusterRequests: Readonly<Record<string, number>>;
  readonly newConnections: number;
  readonly peakConnections: number;
  readonly maxOutOfService: number;
  readonly allowedOutOfService: number;
  readonly coordinatorRssMb: number;
  /** Seconds from the change to each wave's last node done: where the time goes. */
  readonly doneTimesSeconds: readonly number[];
  /** Where the time goes, from the audit log (medians over nodes) and the coordinator's metrics. */
  readonly timeline: {
    /** The change → the first node out of service. */
    readonly firstStartSeconds: number;
    /** A node out of service → its driver pod deleted (cordon, job wait, restart passes). */
    readonly startToDeleteSeconds: number;
    /** Driver pod deleted → the node's last write (replacement Ready, seen, uncordoned). */
    readonly deleteToDoneSeconds: number;
    /** The same in two: deleted → replacement Ready (the cluster: DaemonSet controller, scheduler, KWOK, API server), then Ready → the node's last write (the coordinator). */
    readonly deleteToReadySeconds: number;
    readonly readyToDoneSeconds: number;
    /** A node's last write → the next node out of service in its slot. */
    readonly handoffSeconds: number;
    /** The API server's time per coordinator write. */
    readonly writeLatencyMs: { readonly median: number; readonly p90: number };
    /** Coordinator reconcile passes during the rollout and their mean duration. */
    readonly passes: number;
    readonly meanPassMs: number;
  };
}

const DRIVER = 'bench';
const KEYS = driverKeys(DRIVER);
const NS = 'bench';
const SA = 'coordinator';
/** The label churn's own ServiceAccount, as nfd-master and GFD run under theirs: not exempt from the API server's priority and fairness, as an admin would be. */
const CHURN_SA = 'label-churn';
const NODE_LABEL = 'driver-rollout.bench/node';
const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
/**
 * The only replica: a lease far longer than any renewal can take on a loaded machine (a lost
 * lease stops every write until it is won back, which a rollout's figures must not include).
 * Nothing competes for it, so its length costs nothing here.
 */
const LEASE_FLAGS = ['--lease-duration-seconds', '120', '--renew-deadline-seconds', '90', '--retry-period-seconds', '5'];

let caseNumber = 0;

export async function measureRollout(c: RolloutCase, log: (line: string) => void): Promise<RolloutMeasurement> {
  caseNumber += 1;
  const base = join(tmpdir(), `driver-rollout-bench-${process.pid}-${caseNumber}`);
  const auditPolicy = `${base}-audit-policy.yaml`;
  const auditLog = `${base}-audit.log`;
  await writeFile(auditPolicy, auditPolicyYaml(`system:serviceaccount:${NS}:${SA}`));
  // A NotReady node voids the figures: the bench's nodes outlast a busy machine's stalls.
  const heartbeat = nodeHeartbeatFor(c.nodes, PATIENT_NODE_HEARTBEAT);
  const plane = await startControlPlane({
    profile: 'full',
    controllerQps: 2_000,
    podStartDelayMs: c.reloadSeconds * 1000,
    nodeHeartbeat: heartbeat,
    kwokLeaseWorkers: kwokLeaseWorkers(c.nodes, heartbeat),
    apiServerArgs: [`--audit-policy-file=${auditPolicy}`, `--audit-log-path=${auditLog}`, '--audit-log-format=json', '--max-requests-inflight=2000', '--max-mutating-requests-inflight=1000'],
  });
  try {
    return await runCase(plane, c, heartbeat, auditLog, log);
  } finally {
    await plane.stop();
    await rm(auditPolicy, { force: true });
    await rm(auditLog, { force: true });
  }
}

async function runCase(plane: ControlPlane, c: RolloutCase, heartbeat: NodeHeartbeat, auditLog: string, log: (line: string) => void): Promise<RolloutMeasurement> {
  // One keep-alive pool, as the coordinator and any sound controller has: the single and floor
  // figures must not include a TLS handshake per request (client-node's default).
  const kc = shareApiConnections(plane.kubeConfig());
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const names = Array.from({ length: c.nodes }, (_, i) => `bench-${String(i).padStart(5, '0')}`);
  await retryingWrite('create the namespace', () => core.createNamespace({ body: { metadata: { name: NS } } }));
  await retryingWrite('install the CRD', () => installCrd(kc));
  const coordinatorKubeconfig = await retrying('the coordinator\'s ServiceAccount kubeconfig', () => serviceAccountKubeconfig(plane, kc, SA, 'cluster-admin'));

  log(`creating ${c.nodes} KWOK nodes`);
  await inBatches(names, 20, async (name) => {
    await retryingWrite(`create node ${name}`, () => core.createNode({
      body: {
        metadata: { name, labels: { 'kubernetes.io/hostname': name, type: 'kwok', [NODE_LABEL]: 'true' }, annotations: { [KWOK_NODE_ANNOTATION]: 'fake', 'node.alpha.kubernetes.io/ttl': '0' } },
      },
    }));
  });
  let ready = 0;
  await until(`${c.nodes} KWOK nodes Ready`, 600_000, async () => {
    ready = (await core.listNode({ labelSelector: NODE_LABEL })).items.filter(isNodeReady).length;
    return ready === c.nodes;
  }, { intervalMs: setupPollMs(c.nodes), describe: () => `${ready} Ready` });

  log('creating the driver DaemonSet');
  await retryingWrite('create the driver DaemonSet', () => apps.createNamespacedDaemonSet({ namespace: NS, body: daemonSet('driver:v1') }));
  let readyPods = 0;
  await until(`${c.nodes} driver pods Ready (DaemonSet controller, scheduler, KWOK)`, 900_000, async () => {
    readyPods = readyDriverPods(await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=driver' }), 'driver:v1');
    return readyPods === c.nodes;
  }, { intervalMs: setupPollMs(c.nodes), describe: () => `${readyPods} Ready` });

  // From here to the rollout's end: the floors are the cluster's under the same churn.
  const churn = c.labelChurnSeconds > 0 ? await startLabelChurn(plane, kc, c.labelChurnSeconds, log) : undefined;
  try {
    return await measureWithChurn(plane, kc, c, names, heartbeat, coordinatorKubeconfig, auditLog, churn, log);
  } finally {
    churn?.signal('SIGKILL');
  }
}

async function measureWithChurn(
  plane: ControlPlane,
  kc: KubeConfig,
  c: RolloutCase,
  names: readonly string[],
  heartbeat: NodeHeartbeat,
  coordinatorKubeconfig: string,
  auditLog: string,
  churn: ProgramProcess | undefined,
  log: (line: string) => void,
): Promise<RolloutMeasurement> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const samples: number[] = [];
  for (const node of names.slice(0, SINGLE_SAMPLES)) samples.push(await replaceOnePod(core, node));
  const single = quantile([...samples].sort((a, b) => a - b), 0.5);
  log(`one driver pod replaced in ${samples.map((s) => s.toFixed(2)).join(', ')} s`);

  const allowed = Math.ceil((c.nodes * c.unavailablePercent) / 100);
  const floorSamples: number[] = [];
  for (const wave of floorWaves(names, allowed)) {
    try {
      floorSamples.push(await replaceWaveAtOnce(kc, core, wave));
    } catch (error) {
      // A diagnostic: the rollout is still measured, with the floor left out.
      log(`the cluster's floor, a wave of ${wave.length}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  const floor = floorSamples.length === 0 ? Number.NaN : quantile([...floorSamples].sort((a, b) => a - b), 0.5);
  log(`one wave's ${allowed} driver pods replaced at once, no coordinator, in ${floorSamples.map((s) => s.toFixed(2)).join(', ')} s`);
  const waves = Math.ceil(c.nodes / allowed);
  const pipelineFloor = { pods: Number.NaN, cordoned: Number.NaN };
  // Only without a reload delay: with one, it would cost as long as the rollout itself, and the
  // delay, not the cluster, would set it. With one wave it is the floor above.
  if (c.reloadSeconds === 0 && waves > 1) {
    for (const cordon of [false, true]) {
      const what = cordon ? 'each node cordoned before and uncordoned after' : 'nothing else written';
      try {
        const perWave = (await replaceInSlots(kc, core, names, allowed, cordon)) / waves;
        if (cordon) pipelineFloor.cordoned = perWave;
        else pipelineFloor.pods = perWave;
        log(`every driver pod replaced ${allowed} at a time, no coordinator, ${what}: ${perWave.toFixed(2)} s per wave`);
      } catch (error) {
        log(`the cluster's pipelined floor (${what}): ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
  await retryingWrite('create the DriverRollout', () => kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: DRIVER_ROLLOUT_GROUP,
    version: DRIVER_ROLLOUT_VERSION,
    plural: DRIVER_ROLLOUT_PLURAL,
    namespace: NS,
    body: {
      apiVersion: `${DRIVER_ROLLOUT_GROUP}/${DRIVER_ROLLOUT_VERSION}`,
      kind: 'DriverRollout',
      metadata: { name: 'driver', namespace: NS },
      spec: { driverName: DRIVER, selector: { matchLabels: { app: 'driver' } }, upgradePolicy: { maxParallelUpgrades: 0, maxUnavailable: `${c.unavailablePercent}%` } },
    },
  }));
  const metricsPort = await freePort();
  const profile = coordinatorProfiling();
  const coordinator = startProgram('coordinator/main.ts', {
    env: { ...COORDINATOR_ALLOCATOR_ENV, ...profile.env },
    args: ['--kubeconfig', coordinatorKubeconfig, '--namespace', NS, '--lease-namespace', NS, '--identity', 'bench', '--metrics-port', String(metricsPort), '--log-level', 'warn', ...LEASE_FLAGS],
  });
  const apiPort = Number(new URL(plane.server).port);
  // Every 250 ms: a connection per request lived for seconds (undici keeps an idle one 4 s), and
  // reading /proc 20 times a second cost the machine the rollout is measured on.
  const sampler = sampleApiConnections(coordinator.pid, apiPort, 250);
  let stopWatches = (): void => undefined;
  try {
    let before: V1Node[] = [];
    await until('every node upgrade-done before the change (the coordinator labels the installed nodes)', 600_000, async () => {
      before = (await core.listNode({ labelSelector: NODE_LABEL })).items;
      return before.every((n) => n.metadata?.labels?.[KEYS.upgradeState] === 'upgrade-done');
    }, { intervalMs: setupPollMs(c.nodes), describe: () => stateCounts(before), stopIf: () => exitedWith(coordinator) });
    // The Events of that labelling too: they must not count as the rollout's.
    await until('the coordinator\'s queued Events sent (before the change)', 300_000, async () => (await retrying('read the coordinator\'s metrics', () => eventsQueued(metricsPort))) === 0, { intervalMs: 100 });
    const connectionsBefore = new Set(sampler.seen());
    const metricsBefore = await retrying('read apiserver_request_total', () => requestTotals(kc, plane.server));
    const auditOffset = (await stat(auditLog)).size;
    const passesBefore = await retrying('read the coordinator\'s metrics', () => reconcilePasses(metricsPort));
    const conflictsBefore = await retrying('read the coordinator\'s metrics', () => writeConflicts(metricsPort));
    const cpuBefore = await retrying('read the coordinator\'s metrics', () => cpuSeconds(metricsPort));
    const driverPods = await retrying('list the driver pods', () => core.listNamespacedPod({ namespace: NS, labelSelector: 'app=driver' }));
    const podNodes = new Map(driverPods.items.map((p): [string, string] => [p.metadata?.name ?? '', p.spec?.nodeName ?? '']));
    const replacements = watchReplacements(kc, 'driver:v2');
    const progress = watchProgress(kc, (node) => replacements.readyAt.has(node));
    // A case that fails from here must not leave its watches re-opening against a stopped API server (the bench would never exit).
    stopWatches = () => {
      progress.stop();
      replacements.stop();
    };
    await replacements.opened;
    await until(`the bench's node watch to list all ${c.nodes} nodes`, 120_000, () => Promise.resolve(progress.seen() === c.nodes), { intervalMs: 100, describe: () => `${progress.seen()} seen (${progress.describeWatch()})` });

    log(`changing the driver template (${c.nodes} nodes, maxUnavailable ${c.unavailablePercent}% = ${allowed}, reload ${c.reloadSeconds} s)`);
    const t0 = performance.now();
    const changedAtMs = Date.now();
    const linesBefore = coordinator.lines.length;
    await retryingWrite('change the driver template', () => apps.patchNamespacedDaemonSet({ name: 'driver', namespace: NS, body: { spec: { template: { spec: { containers: [{ name: 'driver', image: 'driver:v2' }] } } } } }, MERGE_PATCH));
    // Only hangs are caught: the whole rollout may take 4× its ideal plus 60 s a wave (a loaded
    // machine), and no node may be left without progress for 5 minutes plus 2 reloads.
    const waveCount = Math.ceil(c.nodes / allowed);
    const timeoutMs = Math.max(900_000, 4 * waveCount * (c.reloadSeconds + 60) * 1000);
    await until('every node upgraded (out of upgrade-done and back, uncordoned)', timeoutMs, () => Promise.resolve(progress.doneCount() === c.nodes), {
      intervalMs: 100,
      describe: () => `${progress.doneCount()}/${c.nodes} done; not done: ${progress.describeNotDone()}; ${progress.describeWatch()}`,
      stopIf: () => exitedWith(coordinator) ?? progress.failed() ?? progress.stalledFor(300_000 + 2_000 * c.reloadSeconds),
    });
    const cpuAtDone = await retrying('read the coordinator\'s metrics', () => cpuSeconds(metricsPort));
    const doneAt = progress.doneTimes().map((t) => (t - t0) / 1000).sort((a, b) => a - b);
    const wall = doneAt.at(-1) ?? Number.NaN;
    const replanned = coordinator.lines.slice(linesBefore).filter((l) => l.msg === ACTION_FAILED_MESSAGE).length;
    const labelChurn = await stopLabelChurn(churn, core);
    // Events go out behind the writes (EventQueue): they are the rollout's too, so the audit log is
    // read once the last of them is sent.
    await until('the coordinator\'s queued Events sent', 300_000, async () => (await retrying('read the coordinator\'s metrics', () => eventsQueued(metricsPort))) === 0, { intervalMs: 100 });
    const eventsSentAfter = (performance.now() - t0) / 1000 - wall;
    stopWatches();
    await sampler.stop();
    const metricsAfter = await retrying('read apiserver_request_total', () => requestTotals(kc, plane.server));
    const passes = diff(await retrying('read the coordinator\'s metrics', () => reconcilePasses(metricsPort)), passesBefore);
    const conflicts = (await retrying('read the coordinator\'s metrics', () => writeConflicts(metricsPort))) - conflictsBefore;
    const audit = summarizeRolloutAudit(parseAuditLines((await readFile(auditLog)).subarray(auditOffset).toString('utf8')), { changedAtMs, podNodes, slots: allowed, stateLabel: KEYS.upgradeState, replacementReadyAt: replacements.readyAt });
    const requests = audit.byVerb;
    const opened = [...sampler.seen()].filter((s) => !connectionsBefore.has(s)).length;
    const rss = await rssMb(coordinator.pid);
    const ideal = waves * single;
    const perNode = Object.fromEntries(Object.entries(requests).map(([verb, n]) => [verb, round(n / c.nodes, 2)]));
    const perNodeByResource = Object.fromEntries(Object.entries(audit.byVerbAndResource).map(([key, n]) => [key, round(n / c.nodes, 2)]));
    const writes = Object.entries(requests).filter(([verb]) => WRITE_VERBS.has(verb)).reduce((sum, [, n]) => sum + n, 0);
    return {
      case: c,
      wallSeconds: round(wall, 2),
      singleReplaceSeconds: round(single, 2),
      singleReplaceSamples: samples.map((s) => round(s, 2)),
      waves,
      idealSeconds: round(ideal, 2),
      ratio: round(wall / ideal, 3),
      overheadPerWaveSeconds: round((wall - ideal) / waves, 3),
      waveFloorSeconds: round(floor, 2),
      waveFloorSamples: floorSamples.map((s) => round(s, 2)),
      aboveFloorPerWaveSeconds: round(wall / waves - floor, 3),
      pipelineFloorPerWaveSeconds: round(pipelineFloor.pods, 3),
      abovePipelineFloorPerWaveSeconds: round(wall / waves - pipelineFloor.pods, 3),
      cordonPipelineFloorPerWaveSeconds: round(pipelineFloor.cordoned, 3),
      aboveCordonPipelineFloorPerWaveSeconds: round(wall / waves - pipelineFloor.cordoned, 3),
      eventsSentAfterSeconds: round(eventsSentAfter, 2),
      requestsPerNode: perNode,
      requestsPerNodeByResource: perNodeByResource,
      writesPerNode: round(writes / c.nodes, 2),
      eventsPerNode: round((requests['create:events'] ?? 0) / c.nodes, 2),
      conflictsPerNode: round(conflicts / c.nodes, 3),
      retriesPerNode: round((audit.byVerbAndResource['get nodes'] ?? 0) / c.nodes, 3),
      replannedPerNode: round(replanned / c.nodes, 3),
      coordinatorCpuSeconds: round(cpuAtDone - cpuBefore, 2),
      mostNotReady: progress.mostNotReady(),
      heartbeat,
      labelChurn,
      clusterRequests: diff(metricsAfter, metricsBefore),
      newConnections: opened,
      peakConnections: sampler.peak(),
      maxOutOfService: progress.maxOutOfService(),
      allowedOutOfService: allowed,
      coordinatorRssMb: rss,
      doneTimesSeconds: waveEnds(doneAt, allowed),
      timeline: {
        firstStartSeconds: round(audit.firstStartSeconds, 2),
        startToDeleteSeconds: round(audit.startToDeleteSeconds, 2),
        deleteToDoneSeconds: round(audit.deleteToDoneSeconds, 2),
        deleteToReadySeconds: round(audit.deleteToReadySeconds, 2),
        readyToDoneSeconds: round(audit.readyToDoneSeconds, 2),
        handoffSeconds: round(audit.handoffSeconds, 2),
        writeLatencyMs: audit.writeLatencyMs,
        passes: passes.count ?? 0,
        meanPassMs: round(((passes.sum ?? 0) / Math.max(1, passes.count ?? 0)) * 1000, 1),
      },
    };
  } finally {
    stopWatches();
    await sampler.stop();
    coordinator.signal(profile.stop);
    await coordinator.exited;
  }
}

/** The label churn (bench/run-label-churn.ts) over the bench's nodes, once it writes. */
async function startLabelChurn(plane: ControlPlane, kc: KubeConfig, intervalSeconds: number, log: (line: string) => void): Promise<ProgramProcess> {
  await retryingWrite('the label churn\'s ClusterRole', () => kc.makeApiClient(RbacAuthorizationV1Api).createClusterRole({
    body: { metadata: { name: `bench-${CHURN_SA}` }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'patch'] }] },
  }));
  const kubeconfig = await retrying('the label churn\'s ServiceAccount kubeconfig', () => serviceAccountKubeconfig(plane, kc, CHURN_SA, `bench-${CHURN_SA}`));
  const churn = startProgram('bench/run-label-churn.ts', { env: {}, args: ['--kubeconfig', kubeconfig, '--selector', NODE_LABEL, '--interval-seconds', String(intervalSeconds)] });
  const started = await churn.logLine((l) => l.msg === 'label churn started', 120_000);
  log(`label churn: ${String(started.nodes)} nodes, each writer (${String(started.writers)}) every ${String(intervalSeconds)} s per node`);
  return churn;
}

/** Stops the churn, once its writes under way end, and reads which of its stored labels the nodes no longer carry; undefined without churn. */
async function stopLabelChurn(churn: ProgramProcess | undefined, core: CoreV1Api): Promise<LabelChurnMeasurement | undefined> {
  if (churn === undefined) return undefined;
  churn.signal('SIGTERM');
  const summary = await churn.logLine((l) => l.msg === 'label churn stopped', 120_000) as unknown as {
    intervalSeconds: number; seconds: number; sent: number; stored: number; failed: number; skipped: number; firstErrors: string[]; lastStored: Record<string, Record<string, number>>;
  };
  const nodes = await retrying('list the nodes', () => core.listNode({ labelSelector: NODE_LABEL }));
  const lost = lostChurnLabels(new Map(nodes.items.map((n): [string, Record<string, string>] => [n.metadata?.name ?? '', n.metadata?.labels ?? {}])), summary.lastStored);
  return {
    intervalSeconds: summary.intervalSeconds,
    seconds: round(summary.seconds, 1),
    sent: summary.sent,
    stored: summary.stored,
    failed: summary.failed,
    skipped: summary.skipped,
    storedPerSecond: round(summary.stored / summary.seconds, 1),
    lostLabels: lost.length,
    lostExamples: lost.slice(0, 5),
    firstErrors: summary.firstErrors,
  };
}

/**
 * How often a wait before the measurement lists the whole fleet (nodes or driver pods): every
 * second up to 1,000 nodes, then 1 ms per node; a 5,000-node list is megabytes that the API
 * server and the bench serialize and parse on the cores the test bed needs to set up.
 */
function setupPollMs(nodes: number): number {
  return Math.max(1_000, nodes);
}

function waveEnds(doneAt: readonly number[], perWave: number): number[] {
  const ends: number[] = [];
  for (let i = perWave - 1; i < doneAt.length; i += perWave) ends.push(round(doneAt[i] ?? Number.NaN, 2));
  if (doneAt.length % perWave !== 0) ends.push(round(doneAt.at(-1) ?? Number.NaN, 2));
  return ends;
}

function daemonSet(image: string) {
  return {
    metadata: { name: 'driver', namespace: NS, labels: { app: 'driver' } },
    spec: {
      selector: { matchLabels: { app: 'driver' } },
      updateStrategy: { type: 'OnDelete' },
      template: {
        metadata: { labels: { app: 'driver' } },
        spec: { nodeSelector: { [NODE_LABEL]: 'true' }, tolerations: [{ operator: 'Exists' }], terminationGracePeriodSeconds: 0, containers: [{ name: 'driver', image }] },
      },
    },
  };
}

/**
 * The cluster's floor for one wave: the driver pods on `nodes` deleted at once while no
 * coordinator runs; seconds until every one has a Ready replacement (a pod watch, so the polling
 * adds no load). The DaemonSet controller, the scheduler, KWOK and the API server replace them
 * concurrently on the cores the rollout shares: no controller finishes a wave sooner here.
 */
async function replaceWaveAtOnce(kc: KubeConfig, core: CoreV1Api, nodes: readonly string[]): Promise<number> {
  const wanted = new Set(nodes);
  const pods = await retrying('list the driver pods', () => core.listNamespacedPod({ namespace: NS, labelSelector: 'app=driver' }));
  const old = pods.items.filter((p) => wanted.has(p.spec?.nodeName ?? ''));
  const oldUids = new Set(old.map((p) => p.metadata?.uid));
  const replaced = new Set<string>();
  let allReadyAt: number | undefined;
  let listed = 'not listed yet';
  let listedAt = performance.now();
  const stop = keepWatching(kc, `/api/v1/namespaces/${NS}/pods`, { labelSelector: 'app=driver' }, (type, pod) => {
    const node = pod.spec?.nodeName ?? '';
    if (type === 'DELETED' || !wanted.has(node) || oldUids.has(pod.metadata?.uid) || !isPodReady(pod)) return;
    replaced.add(node);
    if (replaced.size === wanted.size) allReadyAt ??= performance.now();
  });
  try {
    await stop.opened;
    const t0 = performance.now();
    await Promise.all(old.map((p) => retryingWrite(`delete driver pod ${p.metadata?.name ?? ''}`, () => core.deleteNamespacedPod({ name: p.metadata?.name ?? '', namespace: NS }))));
    // The watch times it; a list every 2 s backs it up (a watch may end unseen on a loaded machine)
    // and says where the pods are if they never get there.
    const check = async (): Promise<boolean> => {
      if (allReadyAt !== undefined) return true;
      if (performance.now() - listedAt < 2_000) return false;
      listedAt = performance.now();
      const now = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=driver' })).items.filter((p) => wanted.has(p.spec?.nodeName ?? ''));
      const fresh = now.filter((p) => !oldUids.has(p.metadata?.uid));
      const ready = fresh.filter(isPodReady);
      listed = `listed: ${now.length - fresh.length} old pods left, ${fresh.length} new (${ready.length} Ready, phases ${[...new Set(fresh.map((p) => p.status?.phase))].join('/')})`;
      if (new Set(ready.map((p) => p.spec?.nodeName)).size === wanted.size) allReadyAt = listedAt;
      return allReadyAt !== undefined;
    };
    await until(`new Ready driver pods on ${nodes.length} nodes`, 300_000, check, { intervalMs: 50, describe: () => `${replaced.size} replaced as the watch saw; ${listed}` });
    return ((allReadyAt ?? Number.NaN) - t0) / 1000;
  } finally {
    stop();
  }
}

/**
 * The cluster's pipelined floor: the driver pods on `nodes` replaced `slots` at a time while no
 * coordinator runs, each slot handed to the next node (SlotPipeline) as soon as a pod watch
 * shows the replacement Ready: what any controller that deletes and watches, and writes nothing
 * else, would need on this machine. With `cordon`, each node is cordoned before its deletion and
 * uncordoned before its slot is handed on, each write awaited: the least for a controller that
 * keeps workloads off a node while its driver restarts. Seconds from the first deletion to the last replacement
 * Ready. A list every 2 s backs the watch up, as in replaceWaveAtOnce.
 */
async function replaceInSlots(kc: KubeConfig, core: CoreV1Api, nodes: readonly string[], slots: number, cordon: boolean): Promise<number> {
  const listed = await retrying('list the driver pods', () => core.listNamespacedPod({ namespace: NS, labelSelector: 'app=driver' }));
  const oldPod = new Map(listed.items.map((p): [string, V1Pod] => [p.spec?.nodeName ?? '', p]));
  const oldUids = new Set(listed.items.map((p) => p.metadata?.uid));
  const pipeline = new SlotPipeline(nodes, slots);
  /** Deletions that failed for good (retryingWrite gave up): the first ends the wait. */
  const failures: unknown[] = [];
  /** When the last replacement was seen Ready. */
  const finished: { at?: number } = {};
  const remove = (node: string): void => {
    const name = oldPod.get(node)?.metadata?.name;
    if (name === undefined) {
      failures.push(new Error(`no driver pod on ${node}`));
      return;
    }
    const cordoned = cordon ? setUnschedulable(core, node, true) : Promise.resolve();
    cordoned.then(() => retryingWrite(`delete driver pod ${name}`, () => core.deleteNamespacedPod({ name, namespace: NS }))).catch((error: unknown) => {
      failures.push(error);
    });
  };
  const handOn = (node: string): void => {
    const next = pipeline.done(node);
    if (next !== undefined) remove(next);
    if (pipeline.finished()) finished.at ??= performance.now();
  };
  const uncordoning = new Set<string>();
  const replaced = (node: string): void => {
    if (!pipeline.isRunning(node) || uncordoning.has(node)) return;
    if (!cordon) {
      handOn(node);
      return;
    }
    uncordoning.add(node);
    setUnschedulable(core, node, false).then(() => {
      handOn(node);
    }, (error: unknown) => failures.push(error));
  };
  const stop = keepWatching(kc, `/api/v1/namespaces/${NS}/pods`, { labelSelector: 'app=driver' }, (type, pod) => {
    if (type !== 'DELETED' && !oldUids.has(pod.metadata?.uid) && isPodReady(pod)) replaced(pod.spec?.nodeName ?? '');
  });
  let listedAt = performance.now();
  try {
    await stop.opened;
    const t0 = performance.now();
    for (const node of pipeline.start()) remove(node);
    await until(`every driver pod replaced ${slots} at a time`, 600_000, async () => {
      if (pipeline.finished() || performance.now() - listedAt < 2_000) return pipeline.finished();
      listedAt = performance.now();
      const now = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=driver' });
      for (const p of now.items) if (!oldUids.has(p.metadata?.uid) && isPodReady(p)) replaced(p.spec?.nodeName ?? '');
      return pipeline.finished();
    }, {
      intervalMs: 50,
      describe: () => `running: ${pipeline.running().slice(0, 5).join(', ')}`,
      stopIf: () => (failures.length === 0 ? undefined : `a deletion failed: ${apiErrorMessage(failures[0])}`),
    });
    return ((finished.at ?? Number.NaN) - t0) / 1000;
  } finally {
    stop();
  }
}

function setUnschedulable(core: CoreV1Api, node: string, unschedulable: boolean): Promise<unknown> {
  return retryingWrite(`${unschedulable ? 'cordon' : 'uncordon'} ${node}`, () => core.patchNode({ name: node, body: { spec: { unschedulable } } }, MERGE_PATCH));
}

/** Deletes the driver pod on `node` and waits for its replacement to be Ready: seconds. */
async function replaceOnePod(core: CoreV1Api, node: string): Promise<number> {
  const list = async (): Promise<V1Pod[]> => (await core.listNamespacedPod({ namespace: NS, fieldSelector: `spec.nodeName=${node}` })).items;
  const old = (await retrying(`list the driver pod on ${node}`, list))[0];
  if (old?.metadata?.name === undefined) throw new Error(`no driver pod on ${node}`);
  const t0 = performance.now();
  const name = old.metadata.name;
  await retryingWrite(`delete driver pod ${name}`, () => core.deleteNamespacedPod({ name, namespace: NS }));
  await until(`a new Ready driver pod on ${node}`, 300_000, async () => (await list()).some((p) => p.metadata?.uid !== old.metadata?.uid && isPodReady(p)), { intervalMs: 25 });
  return (performance.now() - t0) / 1000;
}

interface Progress {
  /** Nodes the watch has shown so far. */
  seen(): number;
  doneCount(): number;
  doneTimes(): number[];
  maxOutOfService(): number;
  /** The most nodes NotReady at once (Ready not True). */
  mostNotReady(): number;
  /** The nodes not yet done, by state (a few names each), for a timeout's message. */
  describeNotDone(): string;
  /** The node watch's own history (keepWatching's describe). */
  describeWatch(): string;
  /**
   * A message once a node is upgrade-failed, else undefined. No node fails on a sound test bed:
   * one that does (e.g. NotReady because a loaded machine stopped KWOK's heartbeats) voids the
   * measurement, and waiting for the others would only end at the stall bound minutes later.
   */
  failed(): string | undefined;
  /** A message once no node's upgrade (state, cordon, reason, readiness) has changed for `ms`, else undefined; other writers' labels are no progress. */
  stalledFor(ms: number): string | undefined;
  stop(): void;
}

/**
 * Watches the nodes: when each leaves upgrade-done and comes back (uncordoned), and the most out
 * of service at once. The watch is re-opened whenever it ends (the API server closes quiet
 * watches; a 30 s reload leaves the nodes quiet that long), from the last resourceVersion seen,
 * or from a fresh list when that is too old (heavy label churn moves past the API server's watch
 * window in a second or two). A node whose whole upgrade fell into such a gap is never seen
 * leaving: it counts as done once it is upgrade-done and schedulable again and `replaced(node)`
 * (its driver pod runs the new template, from the pod watch).
 */
function watchProgress(kc: KubeConfig, replaced: (node: string) => boolean): Progress {
  const latest = new Map<string, V1Node>();
  const left = new Set<string>();
  const done = new Map<string, number>();
  let maxOut = 0;
  let maxNotReady = 0;
  let lastChange = performance.now();
  const stop = keepWatching(kc, '/api/v1/nodes', { labelSelector: NODE_LABEL }, (type, node) => {
    const name = node.metadata?.name ?? '';
    if (type === 'DELETED') return;
    if (upgradeView(latest.get(name)) !== upgradeView(node)) lastChange = performance.now();
    latest.set(name, node);
    const state = node.metadata?.labels?.[KEYS.upgradeState] ?? 'unknown';
    if (state !== 'upgrade-done') left.add(name);
    else markIfDone(name, node);
    const { out, notReady } = countOutAndNotReady(latest.values());
    maxOut = Math.max(maxOut, out);
    maxNotReady = Math.max(maxNotReady, notReady);
  });
  function markIfDone(name: string, node: V1Node): void {
    if (done.has(name) || node.metadata?.labels?.[KEYS.upgradeState] !== 'upgrade-done' || node.spec?.unschedulable === true) return;
    if (left.has(name) || replaced(name)) done.set(name, performance.now());
  }
  return {
    seen: () => latest.size,
    doneCount: () => {
      for (const [name, node] of latest) markIfDone(name, node);
      return done.size;
    },
    doneTimes: () => [...done.values()],
    maxOutOfService: () => maxOut,
    mostNotReady: () => maxNotReady,
    describeNotDone: () => stateCounts([...latest.values()].filter((n) => !done.has(n.metadata?.name ?? ''))),
    describeWatch: () => stop.describe(),
    failed: () => {
      const failed = [...latest.values()].filter((n) => n.metadata?.labels?.[KEYS.upgradeState] === 'upgrade-failed');
      return failed.length === 0 ? undefined : `${failed.length} node(s) upgrade-failed, which voids the measurement: ${stateCounts(failed)}`;
    },
    stalledFor: (ms) => {
      const quiet = performance.now() - lastChange;
      return quiet > ms ? `no node changed for ${Math.round(quiet / 1000)} s` : undefined;
    },
    stop,
  };
}

/** Nodes out of service (cordoned or in an upgrading state) and nodes NotReady. */
function countOutAndNotReady(nodes: Iterable<V1Node>): { out: number; notReady: number } {
  let out = 0;
  let notReady = 0;
  for (const n of nodes) {
    if (n.spec?.unschedulable === true || (UPGRADING_STATES as ReadonlySet<string>).has(n.metadata?.labels?.[KEYS.upgradeState] ?? '')) out += 1;
    if (!isNodeReady(n)) notReady += 1;
  }
  return { out, notReady };
}

/** What of a node tells its upgrade's progress: a change elsewhere (the label churn) is none. */
function upgradeView(n: V1Node | undefined): string {
  return `${n?.metadata?.labels?.[KEYS.upgradeState] ?? ''}|${String(n?.spec?.unschedulable === true)}|${n?.metadata?.annotations?.[KEYS.upgradeReason] ?? ''}|${String(n !== undefined && isNodeReady(n))}`;
}

/** Nodes by upgrade state, with up to 3 names (and cordon, reason) each: what a stuck wait shows. */
function stateCounts(nodes: readonly V1Node[]): string {
  const byState = new Map<string, V1Node[]>();
  for (const n of nodes) {
    const state = n.metadata?.labels?.[KEYS.upgradeState] ?? '(no state label)';
    byState.set(state, [...(byState.get(state) ?? []), n]);
  }
  return [...byState.entries()].map(([state, list]) => {
    const names = list.slice(0, 3).map((n) => {
      const reason = n.metadata?.annotations?.[KEYS.upgradeReason];
      return `${n.metadata?.name ?? '?'}${n.spec?.unschedulable === true ? ' cordoned' : ''}${reason === undefined ? '' : ` (${reason})`}`;
    });
    return `${state}: ${list.length} [${names.join(', ')}${list.length > 3 ? ', ...' : ''}]`;
  }).join('; ') || 'no nodes';
}

function exitedWith(program: ProgramProcess): string | undefined {
  return program.hasExited() ? `the coordinator exited; its output ends:\n${program.output().slice(-3_000)}` : undefined;
}

/**
 * A kubeconfig with the token of ServiceAccount `name` bound to `clusterRole`, so audit entries
 * name its program and the API server's priority and fairness treats it as it would in a cluster.
 */
async function serviceAccountKubeconfig(plane: ControlPlane, kc: KubeConfig, name: string, clusterRole: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: { metadata: { name: `bench-${name}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole }, subjects: [{ kind: 'ServiceAccount', name, namespace: NS }] },
  });
  const token = await core.createNamespacedServiceAccountToken({ name, namespace: NS, body: { spec: { expirationSeconds: 24 * 3600, audiences: [] } } });
  const ca = kc.getCurrentCluster()?.caFile ?? join(plane.workDir, 'pki', 'ca.crt');
  const path = join(plane.workDir, `${name}.kubeconfig`);
  await writeFile(path, `apiVersion: v1
kind: Config
clusters: [{ name: bench, cluster: { server: "${plane.server}", certificate-authority: "${ca}" } }]
users: [{ name: ${name}, user: { token: "${token.status?.token ?? ''}" } }]
contexts: [{ name: bench, context: { cluster: bench, user: ${name} } }]
current-context: bench
`);
  return path;
}

/** The coordinator's requests only; its node writes with their bodies (to tell when a node leaves service). */
function auditPolicyYaml(user: string): string {
  return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  users: ["${user}"]
  verbs: [patch, update]
  resources: [{ group: "", resources: [nodes] }]
- level: Metadata
  users: ["${user}"]
- level: None
`;
}

/** apiserver_request_total summed by verb (every client). */
async function requestTotals(kc: KubeConfig, server: string): Promise<Record<string, number>> {
  const text = await readApiServerMetrics(kc, server);
  const totals: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1];
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (verb !== undefined && Number.isFinite(value)) totals[verb] = (totals[verb] ?? 0) + value;
  }
  return totals;
}

/** The coordinator's Events raised and not yet sent (driver_rollout_events_queued). */
async function eventsQueued(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(/^driver_rollout_events_queued (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
}

/** The coordinator's reconcile passes so far: `count` and `sum` (seconds) of its pass-duration histogram. */
async function reconcilePasses(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (suffix: string): number => Number(new RegExp(`^driver_rollout_reconcile_duration_seconds_${suffix}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { count: value('count'), sum: value('sum') };
}

/** The coordinator's CPU time so far, user and system (prom-client's process_cpu_seconds_total). */
async function cpuSeconds(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(/^process_cpu_seconds_total (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
}

/** The coordinator's cordon writes refused by their guard so far, over every driver. */
async function writeConflicts(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return [...text.matchAll(/^driver_rollout_node_write_conflicts_total(?:\{[^}]*\})? (\S+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

function diff(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]): [string, number] => [k, v - (before[k] ?? 0)]).filter(([, v]) => v !== 0));
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return round(kb / 1024, 1);
}

function isNodeReady(n: V1Node): boolean {
  return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

/**
 * Watches the driver pods: when each node's replacement (a pod running `image`) is first seen
 * Ready (epoch ms, the clock the audit log's timestamps use), to split a node's time after its
 * driver pod's deletion into the cluster's part and the coordinator's.
 */
function watchReplacements(kc: KubeConfig, image: string): { readonly readyAt: ReadonlyMap<string, number>; readonly opened: Promise<void>; stop(): void } {
  const readyAt = new Map<string, number>();
  const stop = keepWatching(kc, `/api/v1/namespaces/${NS}/pods`, { labelSelector: 'app=driver' }, (type, pod) => {
    const node = pod.spec?.nodeName;
    if (type === 'DELETED' || node === undefined || readyAt.has(node)) return;
    if (pod.spec?.containers[0]?.image === image && isPodReady(pod)) readyAt.set(node, Date.now());
  });
  return { readyAt, opened: stop.opened, stop };
}

function isPodReady(p: V1Pod): boolean {
  return p.metadata?.deletionTimestamp == null && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

function readyDriverPods(list: { items: V1Pod[] }, image: string): number {
  return list.items.filter((p) => isPodReady(p) && p.spec?.containers[0]?.image === image).length;
}

async function inBatches<T>(items: readonly T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++];
      if (item !== undefined) await work(item);
    }
  };
  await Promise.all(Array.from({ length: size }, worker));
}

/**
 * `work`, tried again on a failure that may pass (no answer, 5xx, 429) after 1, 2, 4, 8, 16 s: a
 * loaded machine drops a connection now and then.
 */
async function retrying<T>(what: string, work: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const code = apiStatusCode(error);
      if ((code !== undefined && code < 500 && code !== 429) || attempt === 5) {
        const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : '';
        throw new Error(`${what} failed after ${attempt + 1} attempt(s): ${apiErrorMessage(error)}${cause}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000 * 2 ** attempt));
    }
  }
}

/** A create or delete, retried like `retrying`; a retry answered 409 or 404 means an earlier try landed before its answer was lost. */
async function retryingWrite(what: string, work: () => Promise<unknown>): Promise<void> {
  let tried = false;
  await retrying(what, async () => {
    try {
      await work();
    } catch (error) {
      const code = apiStatusCode(error);
      if (!(tried && (code === 409 || code === 404))) throw error;
    } finally {
      tried = true;
    }
  });
}

/**
 * Polls `check` until true. Fails after `timeoutMs`, or at once when `stopIf` names a reason (a
 * program died, nothing moves any more), with `what`, how long it waited and `describe()`: the
 * error says what got stuck. The bounds only catch hangs; they are no measure.
 */
async function until(
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
  options: { intervalMs?: number; describe?: () => string; stopIf?: () => string | undefined } = {},
): Promise<void> {
  const started = performance.now();
  const fail = (why: string): Error => {
    const detail = `${options.describe === undefined ? '' : `; ${options.describe()}`}${lastError}`;
    return new Error(`gave up waiting for ${what} after ${Math.round((performance.now() - started) / 1000)} s: ${why}${detail}`);
  };
  let lastError = '';
  const checked = async (): Promise<boolean> => {
    try {
      return await check();
    } catch (error) {
      lastError = `; last error: ${apiErrorMessage(error)}`; // polled again: a loaded machine drops a request now and then
      return false;
    }
  };
  while (!(await checked())) {
    const stop = options.stopIf?.();
    if (stop !== undefined) throw fail(stop);
    if (performance.now() - started > timeoutMs) throw fail(`timed out (${timeoutMs / 1000} s)`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 1_000));
  }
}
