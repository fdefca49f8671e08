/**
 * `npm start` (also `npm run demo`): a local demo of a driver rollout on a real control plane.
 *
 * It starts the test bed's `full` control plane (etcd, kube-apiserver, controller-manager,
 * scheduler, KWOK), creates 8 simulated GPU nodes in two pools with workloads and a PDB,
 * applies the DriverRollout CRD, a DriverRollout and the driver DaemonSet from manifests/, and
 * runs the real coordinator (`coordinator/main.ts`), the real init container and the real agent
 * (`agent/main.ts` through test/doubles/simulated-agent-main.ts, compiling the sample driver with
 * kbuild and loading it into a simulated kernel) for every driver pod. Then:
 *   1. first install with safe loading: every node is cordoned and drained before its driver loads;
 *   2. an upgrade from 1.0.0 to 2.0.0, pool by pool within maxUnavailable.
 * Progress is shown live with the kubectl plugin's status view (cli/: the same reader and
 * renderer as `kubectl driver-rollout status -w`); the pool limits are checked on every change.
 * Ctrl-C (SIGINT) or SIGTERM at any point stops every process it started and removes its files.
 *
 *   npm start                   # runs both phases, then stops everything
 *   npm start -- --keep         # leaves the cluster running (prints KUBECONFIG) until Ctrl-C
 */
import { AppsV1Api, CoreV1Api, CustomObjectsApi, PolicyV1Api, type KubeConfig, type V1DaemonSet, type V1Node } from '@kubernetes/client-node';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parse } from 'yaml';
import { ClusterReader } from '../cli/read-cluster.ts';
import { renderStatus } from '../cli/render-status.ts';
import { buildRolloutViews } from '../cli/rollout-view.ts';
import { driverKeys, isUpgradeState } from '../shared/keys.ts';
import { startControlPlane, type ControlPlane } from '../test/bed/control-plane.ts';
import { waitUntil } from '../test/bed/wait-until.ts';
import { aSysfsTree, anH100 } from '../test/fixtures/sysfs/sysfs-tree.ts';
import { ProcessKubelet } from './process-kubelet.ts';
import { unavailableByPool, type NodeRow } from './unavailable-by-pool.ts';
import { hasExited } from '../shared/has-exited.ts';

const ROOT = resolve(import.meta.dirname, '..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');
const NAMESPACE = 'driver-rollout';
const DRIVER = 'gpu';
const KEYS = driverKeys(DRIVER);
/** The kernel whose headers ensure-system-packages.sh installed (Debian's linux-headers-amd64). */
const POOLS = { a: { nodes: 4, maxUnavailable: 1 }, b: { nodes: 4, maxUnavailable: 2 } } as const;

const { values: flags } = parseArgs({ options: { keep: { type: 'boolean', default: false }, timeout: { type: 'string', default: '600' } } });

/** Everything the demo started, stopped once (SIGINT, SIGTERM, an error or the end), children first. */
class Running {
  plane: ControlPlane | undefined;
  kubelet: ProcessKubelet | undefined;
  readonly children: ChildProcess[] = [];
  work: string | undefined;
  #stopping: Promise<void> | undefined;

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.kubelet?.stop();
      await Promise.all(this.children.map(stopChild));
      await this.plane?.stop();
      if (this.work !== undefined) await rm(this.work, { recursive: true, force: true });
    })();
    return this.#stopping;
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const running = new Running();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      say(`${signal}: stopping everything the demo started…`);
      void running.stop().then(() => {
        say('stopped');
        process.exit(130);
      });
    });
  }
  try {
    await runDemo(running, started);
  } finally {
    await running.stop();
  }
}

async function runDemo(running: Running, started: number): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'driver-rollout-demo-'));
  running.work = work;
  say(`work dir ${work}; starting a real control plane (first run builds it from Go modules)…`);
  const nodes = Object.entries(POOLS).flatMap(([pool, p]) =>
    Array.from({ length: p.nodes }, (_, i) => ({ name: `gpu-${pool}-${i + 1}`, labels: { pool, 'driver-rollout.demo/gpu': 'true' } })),
  );
  const plane = await startControlPlane({ profile: 'full', nodes });
  running.plane = plane;
  const kc = plane.kubeConfig();
  say(`control plane up at ${plane.server}\n  export KUBECONFIG=${plane.kubeconfigPath}`);
  const kernelVersion = await installedHeadersKernel();
  const sources = await prepareDriverSources(work, ['1.0.0', '2.0.0']);

  kubectl(plane.binDir, plane.kubeconfigPath, 'apply', '-f', join(ROOT, 'manifests/driverrollout-crd.yaml'));
  await waitForCrd(kc);
  const core = kc.makeApiClient(CoreV1Api);
  for (const ns of [NAMESPACE, 'ml']) await core.createNamespace({ body: { metadata: { name: ns } } });

  say(`${nodes.length} KWOK nodes Ready in pools ${Object.keys(POOLS).join(', ')}`);
  await createWorkloads(kc);

  await createDriverRollout(kc);
  await kc.makeApiClient(AppsV1Api).createNamespacedDaemonSet({ namespace: NAMESPACE, body: await driverDaemonSet('1.0.0', sources['1.0.0'] ?? '') });

  running.children.push(startProcess('coordinator', [join(ROOT, 'coordinator/main.ts'), `--kubeconfig=${plane.kubeconfigPath}`, `--namespace=${NAMESPACE}`, '--metrics-port=0', `--lease-namespace=${NAMESPACE}`], join(work, 'coordinator.log')));
  running.kubelet = new ProcessKubelet({
    kubeConfig: kc,
    kubeconfigPath: plane.kubeconfigPath,
    namespace: NAMESPACE,
    labelSelector: 'app.kubernetes.io/name=gpu-driver',
    logDir: join(work, 'pods'),
    nodeEnv: (node) => nodeHost(work, node, kernelVersion),
    // The manifest's `node agent/main.ts`, with the simulated kernel (a test double) wired in.
    programSubstitutes: { 'agent/main.ts': 'test/doubles/simulated-agent-main.ts' },
  });
  await running.kubelet.start();
  say(`coordinator, init containers and agents running; logs under ${work}`);

  const timeoutMs = Number(flags.timeout) * 1000;
  const phases: string[] = [];
  await watchPhase(kc, 'phase 1: first install with safe loading', '1.0.0', timeoutMs, phases);
  await kc.makeApiClient(AppsV1Api).replaceNamespacedDaemonSet({ name: 'gpu-driver', namespace: NAMESPACE, body: await driverDaemonSet('2.0.0', sources['2.0.0'] ?? '', kc) });
  phases.push('driver DaemonSet template changed to 2.0.0 (updateStrategy OnDelete: the coordinator restarts pods node by node)');
  await watchPhase(kc, 'phase 2: upgrade 1.0.0 → 2.0.0', '2.0.0', timeoutMs, phases);

  say(`demo finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (flags.keep) {
    say(`cluster kept running: export KUBECONFIG=${plane.kubeconfigPath}; kubectl get driverrollouts -A; PATH=$PWD/cli:$PATH kubectl driver-rollout status -n ${NAMESPACE} -w; Ctrl-C to stop`);
    await new Promise(() => undefined);
  }
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the child has exited. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (hasExited(child)) return;
  const exited = new Promise<void>((settle) => child.once('exit', () => {
    settle();
  }));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function say(text: string): void {
  process.stdout.write(`[demo] ${text}\n`);
}

function startProcess(name: string, args: string[], logPath: string): ChildProcess {
  const log = createWriteStream(logPath);
  const child = spawn(NODE, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  child.on('exit', (code) => {
    if (code !== 0 && code !== null) say(`${name} exited with ${code}; see ${logPath}`);
  });
  return child;
}

async function installedHeadersKernel(): Promise<string> {
  const { readdir } = await import('node:fs/promises');
  const headers = (await readdir('/usr/src')).filter((d) => d.startsWith('linux-headers-') && !d.endsWith('-common'));
  const kver = headers.map((d) => d.slice('linux-headers-'.length)).sort().at(-1);
  if (kver === undefined) throw new Error('no kernel headers under /usr/src: run scripts/ensure-system-packages.sh');
  return kver;
}

/** One copy of the sample driver per version, with its version.h (a new version, a new srcversion). */
async function prepareDriverSources(work: string, versions: readonly string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const version of versions) {
    const dir = join(work, 'src', version);
    await cp(join(ROOT, 'test/fixtures/sample-driver'), dir, { recursive: true });
    await writeFile(join(dir, 'version.h'), `#define DRSAMPLE_VERSION "${version}"\n`);
    out[version] = dir;
  }
  return out;
}

/** The agents' module cache, outside the repository like the test bed's binaries. */
const DEMO_MODULE_CACHE = join(process.env['DRIVER_ROLLOUT_CACHE'] ?? join(homedir(), '.cache', 'driver-rollout'), 'demo-module-cache');

/** The node's simulated host: 8 H100s in its sysfs, its own module tree, run dir and lock. */
async function nodeHost(work: string, node: string, kernelVersion: string): Promise<Record<string, string>> {
  const host = join(work, 'nodes', node);
  const sysfs = join(host, 'sys');
  await mkdir(join(host, 'run'), { recursive: true });
  try {
    await readFile(join(sysfs, '.written'));
  } catch {
    await aSysfsTree().with(...Array.from({ length: 8 }, (_, i) => anH100(`0000:${(0x18 + i * 0x10).toString(16)}:00.0`, i < 4 ? 0 : 1))).writeTo(sysfs);
    await mkdir(join(sysfs, 'module'), { recursive: true });
    await writeFile(join(sysfs, '.written'), '');
  }
  return {
    SYSFS_ROOT: sysfs,
    SYS_MODULE_ROOT: join(sysfs, 'module'),
    MODULE_ROOT: join(host, 'root'),
    MODPROBE_CONFIG_DIR: join(host, 'run', 'modprobe.d'),
    // Kept across demo runs (keyed by sources, kernel and compiler), so a warm demo compiles nothing.
    CACHE_DIR: DEMO_MODULE_CACHE,
    READY_FILE: join(host, 'run', '.driver-ready'),
    LOCK_PATH: join(host, 'run', 'agent.lock'),
    // The manifest's firmware host paths, moved into the node's directory like the rest.
    FIRMWARE_HOST_DIR: join(host, 'var', 'lib', 'driver-rollout', 'firmware'),
    HOST_FIRMWARE_ROOTS: join(host, 'lib', 'firmware'),
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    KERNEL_ADAPTER: 'simulated',
    KERNEL_VERSION: kernelVersion,
    SIMULATED_LOAD_SECONDS: '1',
    HEADERS_DIRS: `/usr/src/linux-headers-${kernelVersion}`,
    RETRY_INITIAL_SECONDS: '2',
    LOG_LEVEL: 'info',
  };
}

/**
 * Manifests go in with kubectl, as a user applies them. (client-node's typed serializer drops
 * schema keys such as `x-kubernetes-int-or-string` from a plain object, so it cannot send a CRD.)
 */
function kubectl(binDir: string, kubeconfig: string, ...args: string[]): void {
  execFileSync(join(binDir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
}

async function waitForCrd(kc: KubeConfig): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  await waitUntil('the DriverRollout CRD to be served', async () => {
    await custom.listNamespacedCustomObject({ group: 'driverrollout.io', version: 'v1alpha1', namespace: 'default', plural: 'driverrollouts' });
    return true;
  });
}

/** A training Deployment spread over the nodes, protected by a PDB: the drains must honour it. */
async function createWorkloads(kc: KubeConfig): Promise<void> {
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: 'ml',
    body: {
      metadata: { name: 'trainer' },
      spec: {
        replicas: 8,
        selector: { matchLabels: { app: 'trainer' } },
        template: {
          metadata: { labels: { app: 'trainer' } },
          spec: {
            nodeSelector: { 'driver-rollout.demo/gpu': 'true' },
            tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists' }],
            containers: [{ name: 'train', image: 'trainer:latest' }],
          },
        },
      },
    },
  });
  await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({
    namespace: 'ml',
    body: { metadata: { name: 'trainer' }, spec: { maxUnavailable: 2, selector: { matchLabels: { app: 'trainer' } } } },
  });
}

async function createDriverRollout(kc: KubeConfig): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'driverrollout.io',
    version: 'v1alpha1',
    namespace: NAMESPACE,
    plural: 'driverrollouts',
    body: {
      apiVersion: 'driverrollout.io/v1alpha1',
      kind: 'DriverRollout',
      metadata: { name: DRIVER },
      spec: {
        driverName: DRIVER,
        selector: { matchLabels: { 'app.kubernetes.io/name': 'gpu-driver' } },
        upgradePolicy: {
          autoUpgrade: true,
          maxParallelUpgrades: 0,
          maxUnavailable: '50%',
          // The trainers request no GPU resource (KWOK nodes advertise none), so device-pod
          // eviction (on by default) would find nothing and skip the drain this demo shows.
          podDeletion: { enable: false },
          drain: { enable: true, timeoutSeconds: 120, deleteEmptyDir: true },
        },
        maxFailedNodes: 2,
        pools: Object.entries(POOLS).map(([name, p]) => ({ name, nodeSelector: { matchLabels: { pool: name } }, maxUnavailable: p.maxUnavailable })),
      },
    },
  });
}

/** manifests/driver-daemonset.yaml for the demo: the sample driver at `version`, on the demo nodes. */
async function driverDaemonSet(version: string, sourceDir: string, kc?: KubeConfig): Promise<V1DaemonSet> {
  const ds = parse(await readFile(join(ROOT, 'manifests/driver-daemonset.yaml'), 'utf8')) as V1DaemonSet;
  const spec = ds.spec?.template.spec;
  if (spec === undefined) throw new Error('manifests/driver-daemonset.yaml has no pod spec');
  spec.nodeSelector = { 'driver-rollout.demo/gpu': 'true' };
  spec.serviceAccountName = 'default';
  delete spec.priorityClassName;
  const set = (container: { env?: { name: string; value?: string }[] } | undefined, values: Record<string, string>): void => {
    for (const [name, value] of Object.entries(values)) {
      const entry = container?.env?.find((e) => e.name === name);
      if (entry !== undefined) entry.value = value;
      else container?.env?.push({ name, value });
    }
  };
  set(spec.initContainers?.[0], { PREFLIGHT_MODULES: 'drsample_core,drsample_net' });
  // The sample driver stands in for NVIDIA's: the manifest's NVIDIA load plan (pre-loading
  // i2c_core and ipmi from the host's module tree) does not apply to it.
  set(spec.containers[0], { DRIVER_VERSION: version, DRIVER_SOURCE_DIR: sourceDir, DRIVER_MODULES: 'drsample_net', MODULE_PARAMETERS: 'drsample_core.greeting=demo', MODULE_BLACKLIST: '', LOAD_PLAN: 'generic' });
  if (kc !== undefined) {
    const current = await kc.makeApiClient(AppsV1Api).readNamespacedDaemonSet({ name: 'gpu-driver', namespace: NAMESPACE });
    const resourceVersion = current.metadata?.resourceVersion;
    if (resourceVersion !== undefined) ds.metadata = Object.assign(ds.metadata ?? {}, { resourceVersion });
  }
  return ds;
}

async function readRows(kc: KubeConfig): Promise<NodeRow[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const nodes = (await core.listNode({ labelSelector: 'driver-rollout.demo/gpu=true' })).items;
  const pods = (await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/name=gpu-driver' })).items;
  return nodes.map((n: V1Node) => {
    const name = n.metadata?.name ?? '';
    const labels = n.metadata?.labels ?? {};
    const stateLabel = labels[KEYS.upgradeState] ?? 'unknown';
    const pod = pods.find((p) => p.spec?.nodeName === name && p.metadata?.deletionTimestamp === undefined);
    return {
      name,
      pool: labels.pool ?? '-',
      state: isUpgradeState(stateLabel) ? stateLabel : 'unknown',
      cordoned: n.spec?.unschedulable === true,
      driverVersion: labels[KEYS.driverVersion],
      driverReady: pod?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    };
  });
}

/**
 * Shows the plugin's status view (`kubectl driver-rollout status -w`) on every change until every
 * node runs `version`, checking the pool limits each time. A terminal is redrawn in place.
 */
async function watchPhase(kc: KubeConfig, title: string, version: string, timeoutMs: number, notes: string[]): Promise<void> {
  const started = Date.now();
  const reader = new ClusterReader(kc);
  const redraw = process.stdout.isTTY;
  let last = '';
  const peak = new Map<string, number>();
  for (;;) {
    const rows = await readRows(kc);
    for (const [pool, n] of unavailableByPool(rows)) {
      peak.set(pool, Math.max(peak.get(pool) ?? 0, n));
      const limit = POOLS[pool as keyof typeof POOLS].maxUnavailable;
      if (n > limit) throw new Error(`limit broken: ${n} nodes of pool ${pool} out of service, maxUnavailable ${limit}`);
    }
    const views = buildRolloutViews(await reader.readSnapshot(await reader.listRollouts({ namespace: NAMESPACE })), Date.now());
    const width = process.stdout.columns > 0 ? process.stdout.columns : 100;
    const body = renderStatus(views, width).join('\n');
    // A terminal shows the ticking times in state; a log gets a frame only when a node moved.
    const key = redraw ? body : JSON.stringify(rows);
    if (key !== last) {
      const header = [`── ${title} · ${((Date.now() - started) / 1000).toFixed(0)} s`, ...notes.slice(-2).map((n) => `[demo] ${n}`)];
      process.stdout.write(`${redraw ? '\x1b[H\x1b[J' : '\n'}${[...header, body].join('\n')}\n`);
      last = key;
    }
    const done = rows.every((r) => r.state === 'upgrade-done' && r.driverVersion === version && r.driverReady && !r.cordoned);
    if (done) break;
    if (Date.now() - started > timeoutMs) throw new Error(`${title}: not done after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
  const peaks = [...peak].map(([pool, n]) => `pool ${pool}: at most ${n}/${POOLS[pool as keyof typeof POOLS].maxUnavailable} out of service`).join(', ');
  const summary = `${title} complete in ${((Date.now() - started) / 1000).toFixed(1)} s; ${peaks}`;
  notes.push(summary);
  say(summary);
}

await main();
