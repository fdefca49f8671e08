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
import { trimNode, trimPod } from '../../coordinator/cluster/trim-cached-object.ts';
import { startControlPlane } from '../../test/bed/control-plane.ts';
import { startProgram } from '../../test/bed/program-process.ts';
import { clusterObjects } from '../lib/cluster-objects.ts';
import { round } from '../lib/machine.ts';
import type { Figure } from '../lib/results.ts';
import { spreadOf } from '../lib/stats.ts';

const PODS_PER_NODE = 10;

export async function memoryFigures(nodes: number, log: (line: string) => void): Promise<Figure[]> {
  const heap = trimmingSavings(nodes);
  const plane = await startControlPlane({ profile: 'api' });
  try {
    const core = plane.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'work' } } });
    log(`creating ${nodes} nodes and ${nodes * PODS_PER_NODE} pods`);
    await inParallel(nodes, 40, async (i) => {
      const name = `mem-${String(i).padStart(5, '0')}`;
      await core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name, rack: `r${i % 8}` } }, status: { capacity: { cpu: '64', 'nvidia.com/gpu': '8' } } } });
    });
    await inParallel(nodes * PODS_PER_NODE, 40, async (i) => {
      await core.createNamespacedPod({ namespace: 'work', body: pod(`mem-${String(Math.floor(i / PODS_PER_NODE)).padStart(5, '0')}`, i) });
      if ((i + 1) % 10_000 === 0) log(`${i + 1} pods`);
    });
    log('starting the coordinator');
    const coordinator = startProgram('coordinator/main.ts', {
      env: {},
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
      return [
        { name: `coordinator RSS, informers synced over ${nodes.toLocaleString('en')} nodes / ${(nodes * PODS_PER_NODE).toLocaleString('en')} pods`, unit: 'MB', spread: spreadOf(samples), target: { op: '<', value: 300 }, details: { cacheSyncSeconds: round(syncSeconds, 1) } },
        { name: `heap held by the same objects as the API server sends them (in this process)`, unit: 'MB', spread: spreadOf([heap.fullMb]) },
        { name: `heap held by them after trimming (what the coordinator's caches keep)`, unit: 'MB', spread: spreadOf([heap.trimmedMb]) },
      ];
    } finally {
      coordinator.signal('SIGKILL');
      await coordinator.exited;
    }
  } finally {
    await plane.stop();
  }
}

/** Heap retained by server-shaped objects, full and trimmed (--expose-gc makes this precise). */
function trimmingSavings(nodes: number): { fullMb: number; trimmedMb: number } {
  const used = (): number => {
    globalThis.gc?.();
    return process.memoryUsage().heapUsed;
  };
  const before = used();
  const objects = clusterObjects(nodes, PODS_PER_NODE);
  const full = used() - before;
  for (const n of objects.nodes) trimNode(n);
  for (const p of objects.pods) trimPod(p);
  const trimmed = used() - before;
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

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024, 1);
}

async function inParallel(count: number, width: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) await work(next++);
  }));
}
