/**
 * Coordinator memory with its informers over a large cluster: an `api` control plane holding
 * `nodes` Nodes and 10 pods per node (bound by spec.nodeName; nothing runs them), the real
 * coordinator process (coordinator/main.ts) started against it; its resident set once every
 * cache has synced (/readyz). Also, in this process, what trimming (trim-cached-object.ts)
 * saves on the same number of server-shaped objects.
 */
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { COORDINATOR_ALLOCATOR_ENV } from '../../coordinator/allocator-env.ts';
import { ingestNode, ingestPod } from '../../coordinator/cluster/ingest-cached-object.ts';
import { startControlPlane } from '../../test/bed/control-plane.ts';
import { startProgram } from '../../test/bed/program-process.ts';
import { installCrd } from '../../test/integration/coordinator/harness.ts';
import { shareApiConnections } from '../../shared/kube/share-api-connections.ts';
import { DEFAULT_API_CONNECTION_POOL } from '../../shared/kube/api-connection-pool.ts';
import { sumOfSamples } from '../lib/api-server-metrics.ts';
import { clusterObjects } from '../lib/cluster-objects.ts';
import { createInBulk } from '../lib/create-in-bulk.ts';
import { round } from '../lib/machine.ts';
import type { Figure } from '../lib/results.ts';
import { spreadOf } from '../lib/stats.ts';

const PODS_PER_NODE = 10;
/** Requests at once while filling the cluster (admin requests are exempt from API priority and fairness). */
const CREATE_CONCURRENCY = 32;
/** Filling fails, naming what got stuck, when nothing is made for this long. */
const STALL_MS = 120_000;

const nodeName = (i: number): string => `mem-${String(i).padStart(5, '0')}`;

export async function memoryFigures(nodes: number, log: (line: string) => void): Promise<Figure[]> {
  const objectHeap = trimmingSavings(nodes);
  const plane = await startControlPlane({ profile: 'api' });
  try {
    // Keep-alive connections (client-node alone opens one TLS connection per request): 55,000
    // creations in a few minutes instead of tens of minutes of handshakes on a busy machine.
    const kc = shareApiConnections(plane.kubeConfig(), { ...DEFAULT_API_CONNECTION_POOL, requestConnections: CREATE_CONCURRENCY });
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'work' } } });
    // The `api` profile runs no controller-manager, so nothing makes the namespace's default
    // ServiceAccount, without which the ServiceAccount admission plugin refuses every pod.
    await core.createNamespacedServiceAccount({ namespace: 'work', body: { metadata: { name: 'default' } } });
    // The coordinator watches DriverRollouts: without the CRD that cache never syncs.
    await installCrd(kc);
    log(`creating ${nodes} nodes and ${nodes * PODS_PER_NODE} pods, ${CREATE_CONCURRENCY} requests at a time`);
    const made = await createInBulk({ what: 'nodes', count: nodes, concurrency: CREATE_CONCURRENCY, stallMs: STALL_MS, progressEvery: 1_000, log }, async (i) => {
      const name = nodeName(i);
      await core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name, rack: `r${i % 8}` } }, status: { capacity: { cpu: '64', 'nvidia.com/gpu': '8' } } } });
    });
    const madePods = await createInBulk({ what: 'pods', count: nodes * PODS_PER_NODE, concurrency: CREATE_CONCURRENCY, stallMs: STALL_MS, progressEvery: 10_000, log }, async (i) => {
      await core.createNamespacedPod({ namespace: 'work', body: pod(nodeName(Math.floor(i / PODS_PER_NODE)), i) });
    });
    log(`made in ${round(made.seconds + madePods.seconds, 1)} s (${made.retries + madePods.retries} retried requests)`);
    log('starting the coordinator');
    const coordinator = startProgram('coordinator/main.ts', {
      // As in the coordinator's pod (manifests/coordinator.yaml).
      env: { ...COORDINATOR_ALLOCATOR_ENV },
      args: ['--kubeconfig', plane.kubeconfigPath, '--namespace', 'work', '--lease-namespace', 'work', '--identity', 'mem', '--metrics-port', '0', '--log-level', 'info'],
    });
    try {
      const started = await coordinator.logLine((l) => l.msg === 'coordinator started', 120_000);
      const port = Number(started.port);
      const t0 = performance.now();
      while (!(await isReady(port))) {
        if (performance.now() - t0 > 600_000) throw new Error('coordinator caches did not sync in 10 minutes');
        await sleep(500);
      }
      const syncSeconds = (performance.now() - t0) / 1000;
      await sleep(5_000);
      const samples: number[] = [];
      for (let i = 0; i < 5; i++) {
        samples.push(await rssMb(coordinator.pid));
        await sleep(1_000);
      }
      const heap = await coordinatorHeap(port);
      log(`coordinator RSS ${samples.join(', ')} MB; its heap used ${heap.heapUsedMb} MB of ${heap.heapTotalMb} MB, external ${heap.externalMb} MB; caches synced in ${round(syncSeconds, 1)} s`);
      return [
        { name: `coordinator RSS, informers synced over ${nodes.toLocaleString('en')} nodes / ${(nodes * PODS_PER_NODE).toLocaleString('en')} pods`, unit: 'MB', spread: spreadOf(samples), target: { op: '<', value: 300 }, details: { cacheSyncSeconds: round(syncSeconds, 1), ...heap } },
        { name: `heap held by the same objects as the API server sends them (in this process)`, unit: 'MB', spread: spreadOf([objectHeap.fullMb]) },
        { name: `heap held by them as the informers keep them (trimmed + converted for the planner)`, unit: 'MB', spread: spreadOf([objectHeap.trimmedMb]) },
      ];
    } finally {
      coordinator.signal('SIGKILL');
      await coordinator.exited;
    }
  } finally {
    await plane.stop();
  }
}

/**
 * Heap retained by server-shaped objects, full and as the informers keep them (trimmed and
 * converted for the planner, ingest-cached-object.ts); --expose-gc makes this precise.
 */
function trimmingSavings(nodes: number): { fullMb: number; trimmedMb: number } {
  const used = (): number => {
    globalThis.gc?.();
    return process.memoryUsage().heapUsed;
  };
  const before = used();
  const objects = clusterObjects(nodes, PODS_PER_NODE);
  const full = used() - before;
  for (const n of objects.nodes) ingestNode(n);
  for (const p of objects.pods) ingestPod(p);
  const trimmed = used() - before;
  // Read them after the measurement, so that they are still alive at it.
  if (objects.nodes.length + objects.pods.length === 0) throw new Error('no objects measured');
  return { fullMb: round(full / 2 ** 20, 1), trimmedMb: round(trimmed / 2 ** 20, 1) };
}

function pod(node: string, i: number): V1Pod {
  const gpu = i % 2 === 0;
  return {
    metadata: { name: `p-${i}`, labels: { app: i % 3 === 0 ? 'train' : 'web', 'pod-template-hash': 'abc123' }, annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-01T00:00:00Z' } },
    spec: {
      nodeName: node,
      tolerations: [{ operator: 'Exists' }],
      containers: [{ name: 'main', image: 'registry.example/team/app:1.2.3', args: ['--serve', '--port=8080'], env: [{ name: 'MODE', value: 'prod' }], resources: gpu ? { requests: { 'nvidia.com/gpu': '1' }, limits: { 'nvidia.com/gpu': '1' } } : { requests: { cpu: '1' } } }],
    },
  };
}

async function isReady(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;
  } catch {
    return false;
  }
}

/** The coordinator's own heap figures from its /metrics (prom-client's default Node.js metrics). */
async function coordinatorHeap(port: number): Promise<{ heapUsedMb: number; heapTotalMb: number; externalMb: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const mb = (metric: string): number => round(sumOfSamples(text, metric, {}) / 2 ** 20, 1);
  return { heapUsedMb: mb('nodejs_heap_size_used_bytes'), heapTotalMb: mb('nodejs_heap_size_total_bytes'), externalMb: mb('nodejs_external_memory_bytes') };
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024, 1);
}
