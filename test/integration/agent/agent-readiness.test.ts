import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { driverKeys } from '../../../shared/keys.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { aNicOnlyNode, anEmptyNode, type SysfsTree } from '../../fixtures/sysfs/sysfs-tree.ts';
import { installedHeadersKernel } from '../../unit/agent/build/sample-driver.ts';
import { TEST_NODE_LABEL, uniqueTestId } from '../test-bed/fixtures.ts';
import { writeSampleDriverSource } from '../../unit/agent/agent-fixtures.ts';
import { startAgentProcess, type AgentProcess } from './agent-process.ts';

// The agent runs as a child process (`node agent/main.ts`) against the shared real API server,
// with real detection (fixture sysfs), a real kbuild compile of the sample driver against the
// installed Debian headers, and the simulated kernel (nothing is loaded into this machine's).

const cluster = sharedCluster();
const kc = cluster.kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const DRIVER = 'drsample';
const keys = driverKeys(DRIVER, 'example.com');
const kernel = installedHeadersKernel();
const nodeName = uniqueTestId('agent');

let ns: TestNamespace;
let work: string;
let goodSource: string;
let cacheDir: string;
const running: AgentProcess[] = [];

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'agent');
  await createFakeNodes(kc, [{ name: nodeName, labels: { [TEST_NODE_LABEL]: nodeName } }]);
  work = await mkdtemp(join(tmpdir(), 'agent-it-'));
  goodSource = await sampleSource('good', '1.0.0');
  cacheDir = join(work, 'cache');
});

afterEach(async () => {
  for (const agent of running.splice(0)) {
    if (!agent.hasExited()) agent.signal('SIGKILL');
    await agent.exited;
  }
});

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(kc, [nodeName]);
  await rm(work, { recursive: true, force: true });
});

/** The sample driver's sources at `version` (its version.h sets the modules' srcversion). */
function sampleSource(name: string, version: string): Promise<string> {
  return writeSampleDriverSource(join(work, 'src', name), version);
}

/** A driver pod on the fake node that declares the agent's readiness gate, as the DaemonSet does. */
async function aDriverPod(name: string): Promise<void> {
  await core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name },
      spec: {
        nodeName,
        readinessGates: [{ conditionType: keys.driverReadyCondition }],
        containers: [{ name: 'agent', image: 'driver-rollout-agent' }],
      },
    },
  });
  await waitUntil(`pod ${name} to run`, async () => {
    const pod = await core.readNamespacedPod({ name, namespace: ns.name });
    return pod.status?.phase === 'Running' ? pod : undefined;
  });
}

interface Agent {
  readonly process: AgentProcess;
  readonly readyFile: string;
  readonly base: string;
  readonly pod: string;
}

async function startAgent(pod: string, over: Record<string, string> = {}, tree: SysfsTree = aNicOnlyNode()): Promise<Agent> {
  await aDriverPod(pod);
  const dir = join(work, pod);
  await mkdir(dir, { recursive: true });
  const readyFile = join(dir, 'run', '.driver-ready');
  const process = startAgentProcess({
    NODE_NAME: nodeName,
    POD_NAME: pod,
    POD_NAMESPACE: ns.name,
    DRIVER_NAME: DRIVER,
    KEY_DOMAIN: 'example.com',
    DRIVER_VERSION: '1.0.0',
    DRIVER_SOURCE_DIR: goodSource,
    KERNEL_VERSION: kernel,
    DEVICE_KIND: 'nic',
    SYSFS_ROOT: await tree.writeTo(join(dir, 'sys')),
    MODULE_ROOT: join(dir, 'modules'),
    MODPROBE_CONFIG_DIR: join(dir, 'modprobe.d'),
    CACHE_DIR: cacheDir,
    READY_FILE: readyFile,
    LOCK_PATH: join(dir, 'run', 'agent.lock'),
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    KERNEL_ADAPTER: 'simulated',
    KUBECONFIG: cluster.kubeconfigPath,
    RETRY_INITIAL_SECONDS: '1',
    RETRY_MAX_SECONDS: '2',
    ...over,
  });
  running.push(process);
  const serving = await process.logLine((l) => l.msg.startsWith('serving /healthz'));
  return { process, readyFile, base: `http://127.0.0.1:${String(serving.port)}`, pod };
}

async function readCondition(pod: string) {
  const p: V1Pod = await core.readNamespacedPodStatus({ name: pod, namespace: ns.name });
  return p.status?.conditions?.find((c) => c.type === keys.driverReadyCondition);
}

async function readyzStatus(agent: Agent): Promise<number | 'refused'> {
  try {
    return (await fetch(`${agent.base}/readyz`)).status;
  } catch {
    return 'refused';
  }
}

const exists = (path: string) => access(path).then(() => true, () => false);

/**
 * Samples the three readiness views every few ms until all flipped to `want`; returns when each
 * flipped first (for the log) and every sample that broke the order the agent promises: the API
 * condition is True only while both local views are ready (granted last, withdrawn first).
 */
async function watchFlip(agent: Agent, want: boolean, timeoutMs: number) {
  const started = performance.now();
  const at: { file?: number; readyz?: number; condition?: number } = {};
  const outOfOrder: string[] = [];
  while (performance.now() - started < timeoutMs) {
    // The condition is read first: a True seen here was granted before the local views were read.
    const condition = await readCondition(agent.pod);
    const [file, readyz] = await Promise.all([exists(agent.readyFile), readyzStatus(agent)]);
    const t = performance.now() - started;
    if (want && condition?.status === 'True' && (!file || readyz !== 200)) outOfOrder.push(`${t.toFixed(0)} ms: condition True, file ${String(file)}, /readyz ${String(readyz)}`);
    if (at.file === undefined && file === want) at.file = t;
    if (at.readyz === undefined && (readyz === 200) === want) at.readyz = t;
    if (at.condition === undefined && (condition?.status === 'True') === want) at.condition = t;
    if (at.file !== undefined && at.readyz !== undefined && at.condition !== undefined) break;
    await sleep(10);
  }
  return { ...at, outOfOrder };
}

async function waitForReason(pod: string, reason: string, timeoutMs = 90_000) {
  return await waitUntil(`condition reason ${reason} on ${pod}`, async () => {
    const c = await readCondition(pod);
    return c?.reason === reason ? c : undefined;
  }, { timeoutMs, intervalMs: 100 });
}

async function nodeEvents(reason: string) {
  const list = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${nodeName}` });
  return list.items.filter((e) => e.reason === reason);
}

describe('agent with the simulated kernel against the real API server', () => {
  it('builds and loads the driver: condition True, ready file and /readyz flip together; SIGTERM clears all three', async () => {
    const agent = await startAgent('driver-ok');
    const up = await watchFlip(agent, true, 120_000);
    expect(up.file, agent.process.output()).toBeDefined();
    expect(up.readyz).toBeDefined();
    expect(up.condition).toBeDefined();
    // Granted to the API only after the local views show it (the latencies are logged below, not asserted).
    expect(up.outOfOrder).toEqual([]);
    expect(up.condition ?? 0).toBeGreaterThanOrEqual(Math.min(up.file ?? 0, up.readyz ?? 0));

    const condition = await readCondition(agent.pod);
    expect(condition).toMatchObject({ status: 'True', reason: 'Loaded' });
    expect(condition?.message).toContain(`drsample 1.0.0 loaded on kernel ${kernel}`);
    expect(JSON.parse(await readFile(agent.readyFile, 'utf8'))).toMatchObject({ driver: DRIVER, phase: 'Loaded', driverVersion: '1.0.0', deviceCount: 2 });
    const labels = await waitUntil('driver labels on the node', async () => {
      const l = (await core.readNode({ name: nodeName })).metadata?.labels ?? {};
      return l[keys.driverReady] === 'true' ? l : undefined;
    });
    expect(labels).toMatchObject({ [keys.devicePresent]: 'true', [keys.deviceCount]: '2', [keys.driverVersion]: '1.0.0' });
    // KWOK acts as the kubelet: the pod is Ready only now that its gate is True.
    await waitUntil('pod Ready', async () => {
      const p = await core.readNamespacedPod({ name: agent.pod, namespace: ns.name });
      return p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? true : undefined;
    });
    const metrics = await (await fetch(`${agent.base}/metrics`)).text();
    expect(metrics).toMatch(/driver_rollout_agent_build_duration_seconds_count\{driver="drsample",result="(built|cached)"\} 1/);
    expect(metrics).toContain('driver_rollout_agent_load_duration_seconds_count{driver="drsample",result="loaded"} 1');

    agent.process.signal('SIGTERM');
    // Withdrawn everywhere on SIGTERM, before the process exits; the bound only catches a hang.
    const down = await watchFlip(agent, false, 60_000);
    process.stderr.write(`[agent] readiness up (ms from start): ${JSON.stringify(up)}; down after SIGTERM: ${JSON.stringify(down)}\n`);
    expect(down.file, agent.process.output()).toBeDefined();
    expect(down.readyz).toBeDefined();
    expect(down.condition).toBeDefined();
    expect(await readCondition(agent.pod)).toMatchObject({ status: 'False', reason: 'Stopping' });
    expect(await agent.process.exited).toBe(0);
  });

  it('a restarted agent takes the modules from the cache instead of compiling', async () => {
    const first = await startAgent('driver-cache-1');
    await waitForReason(first.pod, 'Loaded');
    first.process.signal('SIGTERM');
    expect(await first.process.exited).toBe(0);
    const agent = await startAgent('driver-cache-2');
    await waitForReason(agent.pod, 'Loaded');
    const metrics = await (await fetch(`${agent.base}/metrics`)).text();
    expect(metrics).toContain('driver_rollout_agent_build_duration_seconds_count{driver="drsample",result="cached"} 1');
    agent.process.signal('SIGTERM');
    expect(await agent.process.exited).toBe(0);
  });

  it('on a node without devices: Ready with reason NoDevice, nothing built', async () => {
    const agent = await startAgent('driver-nodevice', { CACHE_DIR: join(work, 'unused-cache') }, anEmptyNode());
    const condition = await waitForReason(agent.pod, 'NoDevice');
    expect(condition.status).toBe('True');
    expect(await readyzStatus(agent)).toBe(200);
    expect(await exists(join(work, 'unused-cache'))).toBe(false);
    agent.process.signal('SIGTERM');
    expect(await agent.process.exited).toBe(0);
  });
});

describe('failures end in a clear reason on the condition, an Event on the node, and retries — not a crash', () => {
  async function expectFailure(agent: Agent, reason: string, messageParts: readonly string[]) {
    const condition = await waitForReason(agent.pod, reason);
    expect(condition.status).toBe('False');
    for (const part of messageParts) expect(condition.message).toContain(part);
    expect(condition.message?.startsWith('Failed: ')).toBe(true);
    // Retried with backoff: the same failure bumps the Event's count instead of a new Event.
    const events = await waitUntil(`a repeated ${reason} Event`, async () => {
      const found = await nodeEvents(reason);
      return found.some((e) => (e.count ?? 0) >= 2) ? found : undefined;
      // Two whole compiles and a retry delay: minutes on a loaded machine; the bound only catches a hang.
    }, { timeoutMs: 150_000, intervalMs: 250 }).catch((error: unknown) => {
      throw new Error(`${String(error)}\nagent output:\n${agent.process.output()}`);
    });
    expect(events).toHaveLength(1);
    expect(events[0]?.type).toBe('Warning');
    for (const part of messageParts) expect(events[0]?.message).toContain(part);
    expect(agent.process.hasExited()).toBe(false);
    expect((await fetch(`${agent.base}/healthz`)).status).toBe(200);
    expect(await readyzStatus(agent)).toBe(503);
    expect(await exists(agent.readyFile)).toBe(false);
    agent.process.signal('SIGTERM');
    expect(await agent.process.exited).toBe(0);
  }

  it('missing kernel headers: KernelHeadersMissing naming the kernel and the package to install', async () => {
    const agent = await startAgent('driver-noheaders', { KERNEL_VERSION: '6.1.0-999-amd64' });
    await expectFailure(agent, 'KernelHeadersMissing', ['6.1.0-999-amd64', 'linux-headers-6.1.0-999-amd64']);
  });

  it('a failing compile: CompileFailed with the compiler error', async () => {
    const broken = await sampleSource('broken', '1.0.1');
    await writeFile(join(broken, 'drsample_net.c'), `${await readFile(join(broken, 'drsample_net.c'), 'utf8')}\nthis is not C;\n`);
    const agent = await startAgent('driver-badsrc', { DRIVER_SOURCE_DIR: broken, DRIVER_VERSION: '1.0.1' });
    await expectFailure(agent, 'CompileFailed', [`kernel ${kernel}`, 'error']);
  }, 300_000);

  it('a failing modprobe: LoadFailed with modprobe\'s own message', async () => {
    const agent = await startAgent('driver-nodev', { SIMULATED_INIT_FAILURE: 'drsample_core:No such device' });
    await expectFailure(agent, 'LoadFailed', ['drsample_core', 'No such device']);
  });
});
