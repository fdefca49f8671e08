import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  loadYaml,
  type KubeConfig,
  type V1CustomResourceDefinition,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
  type V1PodSpec,
} from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { CoordinatorConfig } from '../../../coordinator/config.ts';
import { planUpgrades } from '../../../coordinator/plan/plan-upgrades.ts';
import { UPGRADING_STATES } from '../../../coordinator/plan/pool-capacity.ts';
import {
  DRIVER_ROLLOUT_GROUP,
  DRIVER_ROLLOUT_PLURAL,
  DRIVER_ROLLOUT_VERSION,
  type DriverRolloutSpecInput,
} from '../../../coordinator/policy/driver-rollout-spec.ts';
import { runCoordinator } from '../../../coordinator/run-coordinator.ts';
import { isConflict } from '../../../shared/kube/api-error.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { driverKeys, type DriverKeys } from '../../../shared/keys.ts';
import { createLogger } from '../../../shared/logger.ts';
import { createFakeNodes, deleteFakeNodes, type FakeNodeSpec } from '../../bed/fake-nodes.ts';
import { keepWatching } from '../../bed/keep-watching.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';

export const TEST_NODE_LABEL = 'driver-rollout.test/id';
export const CRD_PATH = new URL('../../../manifests/driverrollout-crd.yaml', import.meta.url);
export const CRD_NAME = `${DRIVER_ROLLOUT_PLURAL}.${DRIVER_ROLLOUT_GROUP}`;
/** A coordinator's stop that takes longer than this is a hang (in-flight writes end within their 30 s request timeouts, the lease release within the renew deadline). */
const STOP_HANG_MS = 120_000;
const crd = { group: DRIVER_ROLLOUT_GROUP, version: DRIVER_ROLLOUT_VERSION, plural: DRIVER_ROLLOUT_PLURAL };

/** Installs manifests/driverrollout-crd.yaml (once per cluster) and waits until it is Established. */
export async function installCrd(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  // loadYaml maps `x-kubernetes-*` keys to the model's names; a plain YAML parse would lose them.
  const body = loadYaml<V1CustomResourceDefinition>(await readFile(CRD_PATH, 'utf8'));
  try {
    await api.createCustomResourceDefinition({ body });
  } catch (error) {
    if (!isConflict(error)) throw error;
  }
  await waitUntil('the DriverRollout CRD to be Established', async () => {
    const got = await api.readCustomResourceDefinition({ name: CRD_NAME });
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true ? true : undefined;
  });
}

/**
 * One test's world on the shared cluster: a namespace, fake nodes labelled with a unique id, a
 * driver DaemonSet (OnDelete) on exactly those nodes, and a driver name unique to the test so
 * its state labels cannot be confused with another test's. A test of what a driver's name
 * decides (the defaults of its operator) names it (`driver`); its nodes are still its own.
 */
export class RolloutWorld {
  readonly kc: KubeConfig;
  readonly id: string;
  readonly driver: string;
  readonly keys: DriverKeys;
  readonly core: CoreV1Api;
  readonly apps: AppsV1Api;
  readonly custom: CustomObjectsApi;
  ns!: TestNamespace;
  nodeNames: string[] = [];
  private readonly stops: (() => Promise<void>)[] = [];

  /** False for a world beside another (`beside`): the nodes are that world's to delete. */
  private ownsNodes = true;

  constructor(kc: KubeConfig, prefix: string, driver?: string, id?: string) {
    this.kc = kc;
    this.id = id ?? `${prefix}-${randomBytes(3).toString('hex')}`;
    this.driver = driver ?? `t${randomBytes(4).toString('hex')}`;
    this.keys = driverKeys(this.driver);
    this.core = kc.makeApiClient(CoreV1Api);
    this.apps = kc.makeApiClient(AppsV1Api);
    this.custom = kc.makeApiClient(CustomObjectsApi);
  }

  async setUp(nodes: readonly Omit<FakeNodeSpec, 'name'>[] & { length: number }, names?: readonly string[]): Promise<void> {
    this.ns = await createTestNamespace(this.kc, this.id);
    this.nodeNames = nodes.map((_, i) => names?.[i] ?? `${this.id}-${String(i).padStart(2, '0')}`);
    await createFakeNodes(
      this.kc,
      nodes.map((n, i) => ({ ...n, name: this.nodeNames[i] ?? '', labels: { ...n.labels, [TEST_NODE_LABEL]: this.id } })),
    );
  }

  /**
   * A second release beside this world, as a second `helm install` for another driver would run
   * it: the same nodes (and id), a namespace, driver name and DaemonSet of its own. Tear it down
   * before this world; its tearDown leaves the nodes to this one.
   */
  async beside(prefix: string): Promise<RolloutWorld> {
    const other = new RolloutWorld(this.kc, prefix, undefined, this.id);
    other.ns = await createTestNamespace(this.kc, `${prefix}-${this.id}`.slice(0, 50));
    other.nodeNames = this.nodeNames;
    other.ownsNodes = false;
    return other;
  }

  /** Runs `stop` when the test ends, before the nodes and the namespace are deleted (last registered, first run). */
  onTearDown(stop: () => Promise<void>): void {
    this.stops.push(stop);
  }

  async tearDown(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse()) await stop();
    if (this.ownsNodes) await deleteFakeNodes(this.kc, this.nodeNames);
    await this.ns.delete();
  }

  daemonSetBody(image: string): V1DaemonSet {
    return this.daemonSetWith({ terminationGracePeriodSeconds: 0, containers: [{ name: 'driver', image }] });
  }

  /** The test's driver DaemonSet (OnDelete, on exactly the test's nodes) running `pod`. */
  daemonSetWith(pod: Pick<V1PodSpec, 'containers'> & Partial<V1PodSpec>): V1DaemonSet {
    return {
      metadata: { name: 'driver', namespace: this.ns.name, labels: { app: 'driver', test: this.id } },
      spec: {
        selector: { matchLabels: { app: 'driver' } },
        updateStrategy: { type: 'OnDelete' },
        template: {
          metadata: { labels: { app: 'driver' } },
          spec: { nodeSelector: { [TEST_NODE_LABEL]: this.id }, tolerations: [{ operator: 'Exists' }], ...pod },
        },
      },
    };
  }

  /** Creates the driver DaemonSet and waits for a Ready driver pod on every node. */
  async createDriver(image = 'driver:v1'): Promise<void> {
    await this.apps.createNamespacedDaemonSet({ namespace: this.ns.name, body: this.daemonSetBody(image) });
    await this.waitForDriverPods((pods) => pods.length === this.nodeNames.length && pods.every(isPodReady));
  }

  /** A new driver version: a new ControllerRevision; with OnDelete the old pods stay. */
  async bumpDriver(image: string): Promise<void> {
    await this.apps.patchNamespacedDaemonSet(
      { name: 'driver', namespace: this.ns.name, body: { spec: { template: { spec: { containers: [{ name: 'driver', image }] } } } } },
      MERGE_PATCH,
    );
  }

  async driverPods(): Promise<V1Pod[]> {
    return (await this.core.listNamespacedPod({ namespace: this.ns.name, labelSelector: 'app=driver' })).items;
  }

  async waitForDriverPods(check: (pods: V1Pod[]) => boolean, timeoutMs = 60_000): Promise<void> {
    await waitUntil('driver pods', async () => (check(await this.driverPods()) ? true : undefined), { timeoutMs, intervalMs: 200 });
  }

  async createRollout(spec: Partial<DriverRolloutSpecInput>, name = 'driver'): Promise<void> {
    await this.custom.createNamespacedCustomObject({
      ...crd,
      namespace: this.ns.name,
      body: {
        apiVersion: `${DRIVER_ROLLOUT_GROUP}/${DRIVER_ROLLOUT_VERSION}`,
        kind: 'DriverRollout',
        metadata: { name, namespace: this.ns.name },
        spec: { driverName: this.driver, selector: { matchLabels: { app: 'driver' } }, ...spec },
      },
    });
  }

  async rollout(name = 'driver'): Promise<{ metadata?: { generation?: number }; status?: Record<string, unknown> }> {
    return (await this.custom.getNamespacedCustomObject({ ...crd, namespace: this.ns.name, name })) as {
      metadata?: { generation?: number };
      status?: Record<string, unknown>;
    };
  }

  /** Polls the DriverRollout until its status satisfies `check` (the status trails the nodes by a pass). */
  async waitForStatus(what: string, check: (status: Record<string, unknown>) => boolean, timeoutMs = 10_000): Promise<Record<string, unknown>> {
    return waitUntil(`DriverRollout status: ${what}`, async () => {
      const status = (await this.rollout()).status;
      return status !== undefined && check(status) ? status : undefined;
    }, { timeoutMs, intervalMs: 100 });
  }

  coordinatorConfig(overrides: Partial<CoordinatorConfig> = {}): CoordinatorConfig {
    return {
      kubeconfig: undefined,
      namespaces: [this.ns.name],
      leaseName: 'coordinator',
      leaseNamespace: this.ns.name,
      identity: `in-process-${randomBytes(2).toString('hex')}`,
      leaseDurationSeconds: 2,
      renewDeadlineMs: 1_500,
      retryPeriodMs: 200,
      metricsPort: 0,
      logLevel: 'warn',
      ...overrides,
    };
  }

  /** Runs a coordinator in this process until the test ends (or `stop` is called). */
  async startCoordinator(overrides: Partial<CoordinatorConfig> = {}): Promise<{ port: number; stop: () => Promise<void> }> {
    const config = this.coordinatorConfig(overrides);
    const abort = new AbortController();
    const handle = await runCoordinator(config, { kc: this.kc, logger: createLogger('coordinator', config.logLevel), plan: planUpgrades }, abort.signal);
    let stopped = false;
    const stop = async (): Promise<void> => {
      if (stopped) return;
      stopped = true;
      abort.abort();
      // A stop must always finish; when one does not, fail naming the stage instead of running
      // into the test's hook timeout. The bound only catches a hang.
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new Error(`the coordinator did not stop within ${STOP_HANG_MS / 1000} s; pending: ${handle.pendingStop() ?? 'nothing'}`));
        }, STOP_HANG_MS);
      });
      try {
        await Promise.race([handle.done, hung]);
      } finally {
        clearTimeout(timer);
      }
    };
    this.stops.push(stop);
    return { port: handle.port, stop };
  }

  async nodes(): Promise<V1Node[]> {
    return (await this.core.listNode({ labelSelector: `${TEST_NODE_LABEL}=${this.id}` })).items;
  }

  stateOf(node: V1Node): string {
    return node.metadata?.labels?.[this.keys.upgradeState] ?? 'unknown';
  }

  /** Polls the API (not the coordinator's caches) until `check` returns a value. */
  async waitForNodes<T>(what: string, check: (nodes: V1Node[]) => T | undefined, timeoutMs = 60_000): Promise<T> {
    return waitUntil(what, async () => check(await this.nodes()), { timeoutMs, intervalMs: 100 });
  }

  async waitForStates(states: Readonly<Record<string, string>>, timeoutMs = 60_000): Promise<V1Node[]> {
    return this.waitForNodes(`states ${JSON.stringify(states)}`, (nodes) => {
      const ok = Object.entries(states).every(([name, state]) => {
        const node = nodes.find((n) => n.metadata?.name === name);
        return node !== undefined && this.stateOf(node) === state;
      });
      return ok ? nodes : undefined;
    }, timeoutMs);
  }

  /**
   * Watches this test's nodes and calls `check` with every node's latest copy on every event,
   * e.g. to assert a limit holds at every moment. Returns a stop function and the violations seen.
   */
  async watchNodes(check: (nodes: ReadonlyMap<string, V1Node>) => string | undefined): Promise<{ violations: string[]; events: () => number; stop: () => void }> {
    const latest = new Map<string, V1Node>();
    const violations: string[] = [];
    let events = 0;
    for (const n of await this.nodes()) latest.set(n.metadata?.name ?? '', n);
    // Re-opened whenever it ends: the API server closes a watch that idles (client-node gives up
    // after 30 s without an event), and a loaded machine can leave the nodes quiet that long.
    const stop = keepWatching(this.kc, '/api/v1/nodes', { labelSelector: `${TEST_NODE_LABEL}=${this.id}` }, (type, node) => {
      events += 1;
      if (type === 'DELETED') latest.delete(node.metadata?.name ?? '');
      else latest.set(node.metadata?.name ?? '', node);
      const violation = check(latest);
      if (violation !== undefined) violations.push(violation);
    });
    this.stops.push(() => {
      stop();
      return Promise.resolve();
    });
    return { violations, events: () => events, stop };
  }

  async events(reason: string, namespace = 'default'): Promise<{ object: string; message: string; type: string; instance: string }[]> {
    const list = await this.core.listNamespacedEvent({ namespace, fieldSelector: `reason=${reason}` });
    return list.items.map((e) => ({ object: e.involvedObject.name ?? '', message: e.message ?? '', type: e.type ?? '', instance: e.reportingInstance ?? '' }));
  }

  /** A bare pod (no controller) bound to `node`, e.g. a workload the drain must evict. */
  async createPod(node: string, name: string, extra: { labels?: Record<string, string>; resources?: Record<string, string> } = {}): Promise<V1Pod> {
    return this.core.createNamespacedPod({
      namespace: this.ns.name,
      body: {
        metadata: { name, namespace: this.ns.name, labels: { workload: 'true', ...extra.labels } },
        spec: {
          nodeName: node,
          tolerations: [{ operator: 'Exists' }],
          terminationGracePeriodSeconds: 0,
          containers: [
            {
              name: 'work',
              image: 'work:v1',
              ...(extra.resources === undefined ? {} : { resources: { requests: extra.resources, limits: extra.resources } }),
            },
          ],
        },
      },
    });
  }
}

/**
 * A driver DaemonSet body (the world's, a fresh object) made a second driver's, "gpu" beside the
 * world's: named `gpu`, its pods labelled `app=gpu-driver`.
 */
export function asGpuDaemonSet(body: V1DaemonSet): V1DaemonSet {
  if (body.metadata === undefined || body.spec === undefined) throw new Error('a DaemonSet body without metadata or spec');
  body.metadata.name = 'gpu';
  body.metadata.labels = { ...body.metadata.labels, app: 'gpu-driver' };
  body.spec.selector = { matchLabels: { app: 'gpu-driver' } };
  body.spec.template.metadata = { labels: { app: 'gpu-driver' } };
  return body;
}

export function isPodReady(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp == null && pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

/**
 * For a test file: installs the CRD once, and tears down every world `create` made after each
 * test. `create` is called inside a test.
 */
export function useRolloutWorlds(hooks: { beforeAll: (fn: () => Promise<void>) => void; afterEach: (fn: () => Promise<void>) => void }): { readonly kc: KubeConfig; create: (prefix: string, driver?: string) => RolloutWorld } {
  const kc = sharedCluster().kubeConfig();
  const worlds: RolloutWorld[] = [];
  hooks.beforeAll(() => installCrd(kc));
  hooks.afterEach(async () => {
    for (const w of worlds.splice(0)) await w.tearDown();
  });
  return {
    kc,
    create: (prefix, driver) => {
      const world = new RolloutWorld(kc, prefix, driver);
      worlds.push(world);
      return world;
    },
  };
}

/** States in which a node counts against maxUnavailable and maxParallelUpgrades. */
export const UPGRADING: ReadonlySet<string> = UPGRADING_STATES;
