import {
  AppsV1Api,
  AuthenticationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PolicyV1Api,
  type KubernetesObject,
  type V1ContainerStatus,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driverKeys } from '../../shared/keys.ts';
import { apiErrorMessage, apiStatusCode, isNotFound } from '../../shared/kube/api-error.ts';
import { MERGE_PATCH, STRATEGIC_MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { runCachedBuild } from '../bed/ensure-binaries.ts';
import { freePort } from '../bed/free-port.ts';
import { importImageArchives } from '../bed/real-node/start-real-node.ts';
import { imageReference } from '../../drivers/build-driver-images.ts';
import { driverFlavour } from '../../drivers/flavours.ts';
import { keepWatching } from '../bed/keep-watching.ts';
import { waitUntil } from '../bed/wait-until.ts';
import { OTHER_NODE, REAL_NODE_LABEL, realNodeCluster } from './real-node-cluster.ts';
import { chartObjects } from './chart-objects.ts';
import { adaptToRealNode, INSTALL_NAMESPACE, type RealNodeSite } from './shipped-objects.ts';

// The Helm chart (charts/driver-rollout), rendered as a user installs it and applied to a real
// kubelet node with the real images: the init container, the agent (real kernel adapter; this
// machine has no device it serves, and /sys is read-only) and the coordinator Deployment run as
// containers under containerd. What differs from a cluster node, and why, is in
// chart-objects.ts, shipped-objects.ts and README.md.

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const cluster = realNodeCluster();
const kc = cluster.kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const leases = kc.makeApiClient(CoordinationV1Api);
const policy = kc.makeApiClient(PolicyV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
const NODE = cluster.node.name;
const keys = driverKeys('gpu', 'nvidia.com');
const nicKeys = driverKeys('nic', 'nvidia.com');
const WORKLOAD_NS = 'workload';
/** Names the chart gives (release `driver-rollout`, driver `gpu`). */
const DS = 'driver-rollout-gpu';
const NIC_DS = 'driver-rollout-nic';
/** Each driver agent's HTTP port on the host network, the same for every install here (a re-apply keeps the port). */
let agentPorts: Record<string, number>;
const LEASE = 'driver-rollout-coordinator';
/** The coordinator's PodDisruptionBudget (the chart names it like the Deployment and the Lease). */
const COORDINATOR_PDB = 'driver-rollout-coordinator';
const DRIVER_SERVICE_ACCOUNT = 'driver-rollout-driver';
const ALL_STATES = [
  'upgrade-required', 'cordon-required', 'wait-for-jobs-required', 'pod-deletion-required', 'drain-required',
  'pod-restart-required', 'validation-required', 'uncordon-required', 'upgrade-done',
];
let modulesBefore: string;

/** The coordinator's pods not being deleted, by name. */
const coordinatorPods = async (): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace: INSTALL_NAMESPACE, labelSelector: 'app.kubernetes.io/component=coordinator' })).items
    .filter((p) => p.metadata?.deletionTimestamp === undefined)
    .sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
const leaseHolder = async (): Promise<string | undefined> => (await leases.readNamespacedLease({ name: LEASE, namespace: INSTALL_NAMESPACE })).spec?.holderIdentity;
const leaderPod = async (): Promise<V1Pod | undefined> => {
  const holder = await leaseHolder();
  return (await coordinatorPods()).find((p) => p.metadata?.name === holder);
};
/** A coordinator pod's /metrics, from its address on the node's bridge; '' when it does not answer. */
async function scrapeMetrics(pod: V1Pod | undefined): Promise<string> {
  const port = pod?.spec?.containers[0]?.ports?.find((p) => p.name === 'metrics')?.containerPort;
  const ip = pod?.status?.podIP;
  if (ip === undefined || port === undefined) return '';
  return await fetch(`http://${ip}:${String(port)}/metrics`, { signal: AbortSignal.timeout(5_000) }).then(async (r) => await r.text(), () => '');
}

const node = async (): Promise<V1Node> => await core.readNode({ name: NODE });
const driverPods = async (): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace: INSTALL_NAMESPACE, labelSelector: `app.kubernetes.io/name=${DS}` })).items;
const condition = (pod: V1Pod | undefined, type: string): string | undefined => pod?.status?.conditions?.find((c) => c.type === type)?.status;
const stateEvents = async (): Promise<string[]> => {
  const events = (await core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${NODE}` })).items;
  return events
    .filter((e) => e.reason === 'GPUDriverUpgrade')
    // Created in order; timestamps have seconds precision, etcd's revision orders them exactly.
    .sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion))
    .map((e) => /\[(.*)\]/.exec(e.message ?? '')?.[1] ?? '');
};

beforeAll(async () => {
  modulesBefore = await loadedModules();
  agentPorts = { [DS]: await freePort(), [NIC_DS]: await freePort() };
  // The driver images the presets name (test/images/build-driver-images.sh; a cold build waits
  // for the NVIDIA modules the vendor-drivers setup builds in the background).
  const driverImages = await runCachedBuild(join(REPO, 'test/images/build-driver-images.sh'));
  for (const flavour of ['nvidia', 'dkms-nic']) {
    // What a pull costs the node, without a registry here: loading the image into containerd.
    const archive = join(driverImages, `${flavour}.tar`);
    const started = performance.now();
    await importImageArchives(cluster.node.dir, [archive]);
    console.info(`driver image ${flavour}: ${Math.round((await stat(archive)).size / 1e6)} MB, imported into the node's containerd in ${Math.round(performance.now() - started)} ms`);
  }
  for (const name of [INSTALL_NAMESPACE, WORKLOAD_NS]) await core.createNamespace({ body: { metadata: { name } } });
  // A workload on the node for the drain to evict (the pause image is what the node has).
  await apps.createNamespacedDeployment({
    namespace: WORKLOAD_NS,
    body: {
      metadata: { name: 'workload' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'workload' } },
        template: {
          metadata: { labels: { app: 'workload' } },
          spec: {
            hostNetwork: true,
            nodeSelector: { [REAL_NODE_LABEL]: 'true' },
            terminationGracePeriodSeconds: 5,
            containers: [{ name: 'pause', image: await pauseImage(), imagePullPolicy: 'Never' }],
          },
        },
      },
    },
  });
  await waitUntil('the workload to run on the real node', async () => {
    const pods = (await core.listNamespacedPod({ namespace: WORKLOAD_NS })).items;
    return pods.some((p) => p.status?.phase === 'Running' && p.spec?.nodeName === NODE) ? true : undefined;
  }, { timeoutMs: 120_000, intervalMs: 500 });
}, 5_400_000);

afterAll(async () => {
  // Nothing was loaded into this machine's kernel by the agent's real kernel adapter.
  expect(await loadedModules()).toBe(modulesBefore);
});

describe('the shipped manifests on a real kubelet node, with the real images', () => {
  const timeline = new Map<string, number>();
  const seen = (what: string, value?: number): void => {
    if (!timeline.has(what)) timeline.set(what, value ?? Date.now());
  };
  let blockedWhileMarked: boolean;
  let workloadUid: string | undefined;

  it('the init container blocks the agent until the real coordinator (leader-elected) has cordoned and drained the node', { timeout: 600_000 }, async () => {
    workloadUid = (await core.listNamespacedPod({ namespace: WORKLOAD_NS })).items[0]?.metadata?.uid;
    const rendered = await chartObjects({ namespace: INSTALL_NAMESPACE, nodeSelector: { [REAL_NODE_LABEL]: 'true' }, hostDir: cluster.node.dir });
    const objects = adaptToRealNode(rendered, realNodeSite());
    expect(objects.filter((o) => o.kind === 'DaemonSet').map((o) => o.metadata?.name)).toEqual([DS]);
    // The chart's DriverRollout (drain enabled through its values) is applied with the rest.
    expect(objects.some((o) => o.kind === 'DriverRollout')).toBe(true);
    await applyInOrder(objects);

    // Watch what happens, every change in the order the API server made it, until the agent runs
    // (a poll can miss the mark: the coordinator reacts within ~100 ms).
    const stopWatching = watchFirstInstall(workloadUid, seen);
    try {
      await waitUntil('the agent container to start', () => Promise.resolve(timeline.has('agent-running') ? true : undefined), { timeoutMs: 480_000, intervalMs: 200 });
    } finally {
      stopWatching();
    }
    blockedWhileMarked = timeline.has('blocked-while-marked');
    expect(timeline.get('init-exit-code')).toBe(0);
    expect(blockedWhileMarked).toBe(true);
    const at = (what: string): number => timeline.get(what) ?? Number.POSITIVE_INFINITY;
    expect(at('marked')).toBeLessThanOrEqual(at('cordoned'));
    expect(at('cordoned')).toBeLessThanOrEqual(at('init-done'));
    expect(at('drained')).toBeLessThanOrEqual(at('init-done'));

    const pod = (await driverPods())[0];
    const initLog = await cluster.containerLog(INSTALL_NAMESPACE, pod?.metadata?.name ?? '', 'safe-load-gate');
    expect(initLog).toContain('node marked: waiting for safe load');
    expect(initLog).toContain('safe-load annotation cleared');
    // The coordinator ran as a pod of the shipped Deployment (two replicas) and one of them held the Lease.
    const pods = await coordinatorPods();
    expect(pods.map((p) => p.spec?.nodeName)).toEqual([NODE, NODE]);
    const lease = await leases.readNamespacedLease({ name: LEASE, namespace: INSTALL_NAMESPACE });
    expect(pods.map((p) => p.metadata?.name)).toContain(lease.spec?.holderIdentity);
  });

  it('the kubelet keeps the pod not Ready until the agent\'s readiness-gate condition is True', { timeout: 300_000 }, async () => {
    const ready = await waitUntil('the driver pod to become Ready', async () => {
      const pod = (await driverPods())[0];
      return condition(pod, 'Ready') === 'True' ? pod : undefined;
    }, { timeoutMs: 180_000, intervalMs: 250 });
    // Real kernel adapter, no device of this driver on this machine: nothing to load.
    expect(ready.status?.conditions?.find((c) => c.type === keys.driverReadyCondition)).toMatchObject({ status: 'True', reason: 'NoDevice' });
    const name = ready.metadata?.name ?? '';
    const agentLog = await cluster.containerLog(INSTALL_NAMESPACE, name, 'agent');
    expect(agentLog).toContain('no device this driver serves on this node');

    // The gate alone decides: with the containers ready, the kubelet follows the condition both ways.
    const setGate = async (status: 'True' | 'False'): Promise<void> => {
      await core.patchNamespacedPodStatus({
        name, namespace: INSTALL_NAMESPACE,
        body: { status: { conditions: [{ type: keys.driverReadyCondition, status, reason: 'TestOverride', lastTransitionTime: new Date() }] } },
      }, STRATEGIC_MERGE_PATCH);
    };
    await setGate('False');
    const notReady = await waitUntil('the kubelet to turn the pod not Ready', async () => {
      const pod = await core.readNamespacedPod({ name, namespace: INSTALL_NAMESPACE });
      return condition(pod, 'Ready') === 'False' ? pod : undefined;
    }, { timeoutMs: 60_000, intervalMs: 250 });
    expect(condition(notReady, 'ContainersReady')).toBe('True');
    expect(notReady.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('ReadinessGatesNotReady');
    await setGate('True');
    await waitUntil('the kubelet to turn the pod Ready again', async () => {
      const pod = await core.readNamespacedPod({ name, namespace: INSTALL_NAMESPACE });
      return condition(pod, 'Ready') === 'True' ? true : undefined;
    }, { timeoutMs: 60_000, intervalMs: 250 });
  });

  it('the admission policy allows the pod\'s kubelet-issued token on its own node and denies it on another node', { timeout: 120_000 }, async () => {
    const pod = (await driverPods())[0];
    const token = await projectedToken(pod?.metadata?.uid ?? '');
    const asPod = tokenKubeConfig(kc, token);
    const whoami = await asPod.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(whoami.status?.userInfo?.username).toBe(`system:serviceaccount:${INSTALL_NAMESPACE}:${DRIVER_SERVICE_ACCOUNT}`);
    expect(whoami.status?.userInfo?.extra?.['authentication.kubernetes.io/node-name']).toEqual([NODE]);

    const nodes = asPod.makeApiClient(CoreV1Api);
    // The agent's own node facts are driver-rollout.io/ labels (the only ones the policy lets it write).
    const label = { metadata: { labels: { 'driver-rollout.io/test-probe': 'x' } } };
    const own = await nodes.patchNode({ name: NODE, body: label, dryRun: 'All' }, MERGE_PATCH);
    expect(own.metadata?.labels?.['driver-rollout.io/test-probe']).toBe('x');
    const other = await nodes.patchNode({ name: OTHER_NODE, body: label, dryRun: 'All' }, MERGE_PATCH).then(() => 'allowed', apiErrorMessage);
    expect(other).toContain(`may change only the node its pod runs on (token bound to node "${NODE}")`);
  });

  it('a DaemonSet template change rolls the real node through the full state machine to upgrade-done', { timeout: 600_000 }, async () => {
    await waitUntil('the first install to finish', async () => ((await node()).metadata?.labels?.[keys.upgradeState] === 'upgrade-done' ? true : undefined), {
      timeoutMs: 180_000, intervalMs: 500,
    });
    expect((await node()).spec?.unschedulable).not.toBe(true);
    const before = (await driverPods())[0];
    const eventsBefore = (await stateEvents()).length;
    await apps.patchNamespacedDaemonSet({
      name: DS, namespace: INSTALL_NAMESPACE,
      body: { spec: { template: { metadata: { annotations: { 'driver-rollout.test/revision': '2' } } } } },
    }, MERGE_PATCH);

    const after = await waitUntil('a new driver pod, Ready, and the node upgrade-done again', async () => {
      const [n, pods] = await Promise.all([node(), driverPods()]);
      const pod = pods.find((p) => p.metadata?.uid !== before?.metadata?.uid);
      const done = n.metadata?.labels?.[keys.upgradeState] === 'upgrade-done' && n.spec?.unschedulable !== true;
      return done && condition(pod, 'Ready') === 'True' ? pod : undefined;
    }, { timeoutMs: 480_000, intervalMs: 500 });
    expect(after.metadata?.labels?.['controller-revision-hash']).not.toBe(before?.metadata?.labels?.['controller-revision-hash']);
    // Every transition the coordinator made is an Event on the node: the whole state machine, in order.
    await waitUntil('the Event for upgrade-done', async () => ((await stateEvents()).at(-1) === 'upgrade-done' ? true : undefined), { timeoutMs: 30_000 });
    // A pass moves a node through the states whose step has nothing to do at once and writes (and
    // reports) only the state it stores, so the Events are the states in order, not necessarily
    // all: upgrade-required is reported only when the node waits there (for a slot), and
    // uncordon-required is passed through on the way to upgrade-done. The node always waits at
    // pod-restart-required for its new driver pod.
    const states = (await stateEvents()).slice(eventsBefore);
    expect(['upgrade-required', 'cordon-required']).toContain(states[0]);
    expect(states).toEqual(expect.arrayContaining(['pod-restart-required', 'upgrade-done']));
    expect(states.map((st) => ALL_STATES.indexOf(st))).toEqual([...states.map((st) => ALL_STATES.indexOf(st))].sort((a, b) => a - b));
    // The new pod's init container waited for safe load again and was released by the coordinator.
    const initLog = await cluster.containerLog(INSTALL_NAMESPACE, after.metadata?.name ?? '', 'safe-load-gate');
    expect(initLog).toContain('safe-load annotation cleared');
  });

  it('the coordinator pod serves NVIDIA\'s GPU Operator metric names next to its own, and every metric the chart\'s PrometheusRule reads', { timeout: 120_000 }, async () => {
    // The leader's pod, on the node's bridge: its address is reachable from this machine.
    const text = await waitUntil('the leader to export the finished rollout', async () => {
      const body = await scrapeMetrics(await leaderPod());
      return sample(body, 'gpu_operator_nodes_upgrades_done') === 1 ? body : undefined;
    }, { timeoutMs: 60_000, intervalMs: 1_000 });
    const ours = { namespace: INSTALL_NAMESPACE, rollout: DS, driver: 'gpu' };
    expect(sample(text, 'driver_rollout_nodes_upgrades_done', ours)).toBe(1);
    expect(sample(text, 'driver_rollout_nodes_upgrades_failed', ours)).toBe(0);
    expect(sample(text, 'gpu_operator_nodes_upgrades_failed')).toBe(0);
    expect(sample(text, 'gpu_operator_nodes_upgrades_in_progress')).toBe(0);
    expect(sample(text, 'gpu_operator_driver_auto_upgrade_enabled')).toBe(1);
    expect(sample(text, 'driver_rollout_coordinator_is_leader')).toBe(1);

    const helm = await runCachedBuild(join(REPO, 'test/bed/build-helm.sh'));
    const { stdout } = await run(helm, ['template', 'driver-rollout', join(REPO, 'charts/driver-rollout'), '--show-only', 'templates/prometheusrule.yaml', '--set', 'metrics.prometheusRule.enabled=true']);
    const read = [...new Set(stdout.match(/\bdriver_rollout_[a-z_]+/g) ?? [])];
    expect(read.length).toBeGreaterThanOrEqual(4);
    const exported = new Set(text.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]));
    expect(read.filter((name) => !exported.has(name))).toEqual([]);
  });

  it('two coordinator replicas: both Ready, one holds the Lease; the PDB allows one eviction and refuses a second; the leader\'s deletion hands over to the other, which acts', { timeout: 600_000 }, async () => {
    const ready = (p: V1Pod): boolean => p.status?.phase === 'Running' && condition(p, 'Ready') === 'True';
    const bothReady = async (what: string): Promise<V1Pod[]> => await waitUntil(what, async () => {
      const pods = await coordinatorPods();
      return pods.length === 2 && pods.every(ready) ? pods : undefined;
    }, { timeoutMs: 300_000, intervalMs: 1_000 });
    const pods = await bothReady('both coordinator replicas Running and Ready');
    expect(pods.map((p) => p.spec?.nodeName)).toEqual([NODE, NODE]);
    // Not the host's network: each replica has its own address and listens on the shipped port.
    expect(new Set(pods.map((p) => p.status?.podIP)).size).toBe(2);
    expect(pods.map((p) => p.spec?.hostNetwork)).toEqual([undefined, undefined]);

    // Exactly one holds the Lease, and each replica's own gauge agrees.
    const leaderName = await leaseHolder();
    const leader = pods.find((p) => p.metadata?.name === leaderName);
    const standby = pods.find((p) => p !== leader);
    expect(leader).toBeDefined();
    const gauges = await waitUntil('both replicas to answer /metrics', async () => {
      const values = await Promise.all(pods.map(async (p) => sample(await scrapeMetrics(p), 'driver_rollout_coordinator_is_leader')));
      return values.every((v) => v !== undefined) ? values : undefined;
    }, { timeoutMs: 60_000, intervalMs: 1_000 });
    expect(gauges).toEqual(pods.map((p) => (p === leader ? 1 : 0)));

    // The PodDisruptionBudget (maxUnavailable 1): one eviction allowed, a second refused while one is gone.
    await waitUntil('the PDB to allow one disruption', async () => {
      const pdb = await policy.readNamespacedPodDisruptionBudget({ name: COORDINATOR_PDB, namespace: INSTALL_NAMESPACE });
      return pdb.status?.disruptionsAllowed === 1 && pdb.status.currentHealthy === 2 ? true : undefined;
    }, { timeoutMs: 120_000, intervalMs: 1_000 });
    const evict = async (pod: V1Pod | undefined): Promise<string> => {
      const name = pod?.metadata?.name ?? '';
      return await core.createNamespacedPodEviction({ name, namespace: INSTALL_NAMESPACE, body: { metadata: { name, namespace: INSTALL_NAMESPACE } } })
        .then(() => 'evicted', (error: unknown) => `${String(apiStatusCode(error))} ${apiErrorMessage(error)}`);
    };
    expect(await evict(standby)).toBe('evicted');
    const refused = await evict(leader);
    expect(refused).toMatch(/^429 /);
    expect(refused).toContain('disruption budget');
    expect(await leaseHolder()).toBe(leaderName);

    // The Deployment replaces the evicted replica; then the leader goes (deleted: SIGTERM, as in a
    // drain or a rollout) and the other replica takes the Lease.
    await bothReady('the evicted replica to be replaced, both Ready');
    await core.deleteNamespacedPod({ name: leaderName ?? '', namespace: INSTALL_NAMESPACE });
    const newLeaderName = await waitUntil('another replica to take the Lease', async () => {
      const holder = await leaseHolder();
      return holder !== undefined && holder !== '' && holder !== leaderName ? holder : undefined;
    }, { timeoutMs: 180_000, intervalMs: 500 });
    await waitUntil('the old leader to be gone', async () =>
      await core.readNamespacedPod({ name: leaderName ?? '', namespace: INSTALL_NAMESPACE }).then(() => undefined, (error: unknown) => (isNotFound(error) ? true : undefined)), {
      timeoutMs: 120_000, intervalMs: 1_000,
    });

    // It acts: a spec change of the DriverRollout gets a status of that generation (no other
    // coordinator is left to write it), and its gauges show the rollout it took over.
    const rollout = { group: 'driverrollout.io', version: 'v1alpha1', namespace: INSTALL_NAMESPACE, plural: 'driverrollouts', name: DS };
    const patched = (await custom.patchNamespacedCustomObject({ ...rollout, body: { spec: { upgradePolicy: { maxParallelUpgrades: 2 } } } }, MERGE_PATCH)) as { metadata: { generation: number } };
    await waitUntil('the new leader to write the status of the new generation', async () => {
      const r = (await custom.getNamespacedCustomObject(rollout)) as { status?: { observedGeneration?: number } };
      return r.status?.observedGeneration === patched.metadata.generation ? true : undefined;
    }, { timeoutMs: 120_000, intervalMs: 500 });
    const newLeader = (await coordinatorPods()).find((p) => p.metadata?.name === newLeaderName);
    const text = await waitUntil('the new leader to export the rollout', async () => {
      const body = await scrapeMetrics(newLeader);
      return sample(body, 'driver_rollout_coordinator_is_leader') === 1 && sample(body, 'gpu_operator_nodes_upgrades_done') === 1 ? body : undefined;
    }, { timeoutMs: 60_000, intervalMs: 1_000 });
    expect(sample(text, 'driver_rollout_nodes_upgrades_done', { namespace: INSTALL_NAMESPACE, rollout: DS, driver: 'gpu' })).toBe(1);
  });

  it('the chart with its presets as shipped: the GPU (nvidia) and NIC (dkms-nic) driver pods run the driver images and end with a named reason', { timeout: 600_000 }, async () => {
    // Every driver of the default values, no preset field changed; only the test bed's adjustments
    // (chart-objects.ts, shipped-objects.ts): scheduled to the real node, host paths under its work dir.
    const rendered = await chartObjects({ namespace: INSTALL_NAMESPACE, nodeSelector: { [REAL_NODE_LABEL]: 'true' }, hostDir: cluster.node.dir, drivers: 'as-shipped' });
    const objects = adaptToRealNode(rendered, realNodeSite());
    const daemonSets = objects.filter((o): o is V1DaemonSet => o.kind === 'DaemonSet');
    const image = (ds: V1DaemonSet): string | undefined => ds.spec?.template.spec?.containers.find((c) => c.name === 'agent')?.image;
    expect(Object.fromEntries(daemonSets.map((ds) => [ds.metadata?.name, image(ds)]))).toEqual({
      [DS]: imageReference('', driverFlavour('nvidia')),
      [NIC_DS]: imageReference('', driverFlavour('dkms-nic')),
    });
    const applied = performance.now();
    await applyAll(objects);
    // The NIC driver is new on the node: its safe load cordons and drains the node first.
    const driverPods = async () => (await core.listNamespacedPod({ namespace: INSTALL_NAMESPACE, labelSelector: 'app.kubernetes.io/component=driver' })).items;
    const ready = await waitUntil('both driver pods to be Ready', async () => {
      const pods = (await driverPods()).filter((p) => p.metadata?.deletionTimestamp === undefined && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      const names = pods.map((p) => p.metadata?.labels?.['app.kubernetes.io/name']).sort();
      return names.join(' ') === [DS, NIC_DS].sort().join(' ') ? pods : undefined;
    }, { timeoutMs: 480_000, intervalMs: 1_000 }).catch(async (error: unknown) => {
      // Where each pod stands: its phase, its conditions and every container's state.
      const states = (await driverPods()).map((p) => JSON.stringify({ pod: p.metadata?.name, phase: p.status?.phase, conditions: p.status?.conditions, containers: [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].map((c) => ({ name: c.name, state: c.state, restarts: c.restartCount })) }));
      throw new Error(`driver pods not both Ready:\n${states.join('\n')}`, { cause: error });
    });
    console.info(`presets as shipped: both driver pods Ready ${Math.round(performance.now() - applied)} ms after the apply (the NIC driver's safe load, cordon and drain included)`);
    for (const [pod, driverKeysOf] of ready.map((p) => [p, p.metadata?.labels?.['app.kubernetes.io/name'] === DS ? keys : nicKeys] as const)) {
      // This machine has neither an NVIDIA GPU nor a Realtek NIC (virtio and Intel functions only).
      expect(pod.status?.conditions?.find((c) => c.type === driverKeysOf.driverReadyCondition)).toMatchObject({ status: 'True', reason: 'NoDevice' });
      expect(pod.status?.containerStatuses?.find((c) => c.name === 'agent')?.image).toContain(pod.metadata?.labels?.['app.kubernetes.io/name'] === DS ? 'nvidia-driver' : 'r8168-driver');
    }
    await waitUntil('the node to be uncordoned after the NIC driver\'s first install', async () => ((await node()).spec?.unschedulable === true ? undefined : true), { timeoutMs: 120_000, intervalMs: 1_000 });
  });
});

/**
 * Watches the node, the driver pods and the workload; `seen` records each fact the first time it
 * holds ('agent-running' last). Returns a function that stops the watches.
 */
function watchFirstInstall(workloadUid: string | undefined, seen: (what: string, value?: number) => void): () => void {
  // Blocked: the node carries the mark while the init container runs and the agent waits.
  let podBlocked = false;
  let marked = false;
  const checkBlocked = (): void => {
    if (podBlocked && marked) seen('blocked-while-marked');
  };
  const watches = [
    keepWatching(kc, '/api/v1/nodes', { fieldSelector: `metadata.name=${NODE}` }, (_type: string, n: V1Node) => {
      marked = n.metadata?.annotations?.[keys.waitForSafeLoad] === 'true';
      if (marked) seen('marked');
      checkBlocked();
      if (n.spec?.unschedulable === true) seen('cordoned');
    }),
    keepWatching(kc, `/api/v1/namespaces/${INSTALL_NAMESPACE}/pods`, { labelSelector: `app.kubernetes.io/name=${DS}` }, (_type: string, pod: V1Pod) => {
      const states = containerStates(pod);
      podBlocked = states.init === 'running' && states.agent === 'waiting';
      checkBlocked();
      if (states.init === 'terminated') {
        seen('init-done');
        seen('init-exit-code', states.initExitCode);
      }
      if (states.agent === 'running') seen('agent-running');
    }),
    keepWatching(kc, `/api/v1/namespaces/${WORKLOAD_NS}/pods`, {}, (type: string, pod: V1Pod) => {
      if (pod.metadata?.uid === workloadUid && (type === 'DELETED' || pod.metadata?.deletionTimestamp !== undefined)) seen('drained');
    }),
  ];
  return () => {
    for (const stop of watches) stop();
  };
}

type ContainerState = 'waiting' | 'running' | 'terminated' | 'absent';

function containerStates(pod: V1Pod | undefined): { init: ContainerState; agent: ContainerState; initExitCode?: number } {
  const stateOf = (s: V1ContainerStatus | undefined): ContainerState =>
    s?.state?.running !== undefined ? 'running' : s?.state?.terminated !== undefined ? 'terminated' : s?.state?.waiting !== undefined ? 'waiting' : 'absent';
  const init = pod?.status?.initContainerStatuses?.[0];
  const agent = pod?.status?.containerStatuses?.find((c) => c.name === 'agent');
  const exitCode = init?.state?.terminated?.exitCode;
  return { init: stateOf(init), agent: stateOf(agent), ...(exitCode === undefined ? {} : { initExitCode: exitCode }) };
}

/**
 * `kubectl create -f` of the rendered objects, in order, as a user pipes `helm template` into
 * kubectl. (client-node's KubernetesObjectApi serializes through its typed models and drops
 * `x-kubernetes-int-or-string` from a CRD's schema: 422.) A CRD is waited for until Established.
 */
async function applyInOrder(objects: readonly KubernetesObject[]): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'drtest-apply-'));
  const kubectl = (...args: string[]): Promise<{ stdout: string }> =>
    run(join(cluster.binDir, 'kubectl'), ['--kubeconfig', cluster.kubeconfigPath, ...args]);
  try {
    for (const [i, o] of objects.entries()) {
      const file = join(dir, `${String(i)}.json`);
      await writeFile(file, JSON.stringify(o));
      await kubectl('create', '-f', file);
      if (o.kind === 'CustomResourceDefinition') {
        await kubectl('wait', '--for=condition=Established', '--timeout=60s', `crd/${o.metadata?.name ?? ''}`);
        // Discovery of the new group reaches the API server's handlers a moment later.
        await sleep(1_000);
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** This machine's real node, as every install here adapts the chart to it (shipped-objects.ts). */
function realNodeSite(): RealNodeSite {
  return {
    apiPort: cluster.apiPort,
    nodeSelector: { [REAL_NODE_LABEL]: 'true' },
    hostDir: cluster.node.dir,
    agentPorts,
    podApi: cluster.node.podApi,
    drainSkipLabels: [keys.drainSkip, nicKeys.drainSkip],
  };
}

/** `kubectl apply --server-side` of the rendered objects, as `helm upgrade` changes what is installed. */
async function applyAll(objects: readonly KubernetesObject[]): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'drtest-apply-'));
  try {
    const file = join(dir, 'objects.json');
    await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
    await run(join(cluster.binDir, 'kubectl'), ['--kubeconfig', cluster.kubeconfigPath, 'apply', '--server-side', '--force-conflicts', '-f', file]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The service-account token the kubelet projected into the pod's volume (read on the host, as the container reads it). */
async function projectedToken(podUid: string): Promise<string> {
  const volumes = join(cluster.node.dir, 'kubelet', 'pods', podUid, 'volumes', 'kubernetes.io~projected');
  for (const v of await readdir(volumes)) {
    if (v.startsWith('kube-api-access-')) return (await readFile(join(volumes, v, 'token'), 'utf8')).trim();
  }
  throw new Error(`no kube-api-access volume in ${volumes}`);
}

function tokenKubeConfig(admin: KubeConfig, token: string): KubeConfig {
  const current = admin.getCurrentCluster();
  if (current === null) throw new Error('admin kubeconfig has no cluster');
  const kcToken = new KubeConfig();
  kcToken.loadFromOptions({
    clusters: [current],
    users: [{ name: 'pod', token }],
    contexts: [{ name: 'pod', cluster: current.name, user: 'pod' }],
    currentContext: 'pod',
  });
  return kcToken;
}

async function pauseImage(): Promise<string> {
  const env = await readFile(join(cluster.node.imagesDir, 'images.env'), 'utf8');
  const line = env.split('\n').find((l) => l.startsWith('pause='));
  if (line === undefined) throw new Error('images.env names no pause image');
  return line.slice('pause='.length);
}

/** The value of metric `name`'s sample carrying `labels` (all of them, any order) in a Prometheus text exposition. */
function sample(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => {
    const [series = ''] = l.split(' ');
    const bare = series.split('{')[0];
    return bare === name && pairs.every((p) => series.includes(p));
  });
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

/** Names of the modules in this machine's kernel; a kernel without /proc/modules loads none at all. */
async function loadedModules(): Promise<string> {
  const text = await readFile('/proc/modules', 'utf8').catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '(no loadable module support)';
    throw error;
  });
  return text.split('\n').map((l) => l.split(' ')[0]).sort().join(' ');
}
