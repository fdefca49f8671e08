/**
 * Safe-load gate latency: the coordinator removes the wait-for-safe-load annotation → the init
 * container (init-container/main.ts, a real process) exits 0. Measured from the API server's
 * answer to the removal to the process exit, over many runs against an `api` control plane.
 * Each removal is made only once the gate's watch on its node is open at the API server
 * (apiserver_longrunning_requests, WATCH on nodes, one more than before the gate started: the
 * API server's own Node authorizer watches nodes too), as it is in a real upgrade, where the gate has waited for the drain for seconds or
 * minutes; so the figure is the gate's reaction, not its start-up.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { driverKeys } from '../../shared/keys.ts';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { startControlPlane } from '../../test/bed/control-plane.ts';
import { waitUntil } from '../../test/bed/wait-until.ts';
import { runGateProcess, type GateProcess } from '../../test/integration/init-container/run-gate-process.ts';
import { readApiServerMetrics, sumOfSamples } from '../lib/api-server-metrics.ts';
import type { Figure } from '../lib/results.ts';
import { quantile, spreadOf } from '../lib/stats.ts';

const keys = driverKeys('gpu');
/** Bound on each wait between runs (gate start-up, watch open/close): only catches hangs (a Node start on a machine at load 25 took over a minute). */
const WAIT_MS = 300_000;

export async function gateFigures(runs: number, log: (line: string) => void): Promise<Figure[]> {
  const plane = await startControlPlane({ profile: 'api' });
  try {
    const kc = plane.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const nodeWatches = async (): Promise<number> =>
      sumOfSamples(await readApiServerMetrics(kc, plane.server), 'apiserver_longrunning_requests', { resource: 'nodes', verb: 'WATCH' });
    const node = 'bench-gate';
    await core.createNode({ body: { metadata: { name: node, labels: { [keys.upgradeState]: 'upgrade-required' } } } });
    const othersWatching = await nodeWatches();
    const samples: number[] = [];
    for (let run = 0; run < runs; run++) {
      await waitUntil('the previous gate\'s node watch to end at the API server', async () => ((await nodeWatches()) <= othersWatching ? true : undefined), { timeoutMs: WAIT_MS });
      const gate = runGateProcess({ KUBECONFIG: plane.kubeconfigPath, NODE_NAME: node, DRIVER_NAME: 'gpu', SAFE_LOAD_ENABLED: 'true', LOG_LEVEL: 'debug' });
      await gate.waitForLine((l) => l.msg === 'watching node', WAIT_MS);
      await waitUntil('the gate\'s node watch to open at the API server', async () => {
        assertRunning(gate);
        return (await nodeWatches()) > othersWatching ? true : undefined;
      }, { timeoutMs: WAIT_MS, intervalMs: 50 });
      await core.patchNode({ name: node, body: { metadata: { annotations: { [keys.waitForSafeLoad]: null } } } }, MERGE_PATCH);
      const acknowledged = performance.now();
      const { code, at } = await gate.exited;
      if (code !== 0) throw new Error(`gate exited ${code}:\n${gate.output()}`);
      samples.push(at - acknowledged);
      if ((run + 1) % 20 === 0) log(`${run + 1}/${runs} gate runs`);
    }
    const sorted = [...samples].sort((a, b) => a - b);
    return [
      { name: `safe-load gate: annotation removed → init container exits, p50 over ${runs} runs`, unit: 'ms', spread: spreadOf([quantile(sorted, 0.5)]), details: { samplesMs: sorted.map((s) => Math.round(s)) } },
      { name: `safe-load gate: annotation removed → init container exits, p99 over ${runs} runs`, unit: 'ms', spread: spreadOf([quantile(sorted, 0.99)]), target: { op: '<', value: 200 } },
      { name: 'safe-load gate: min / median / max', unit: 'ms', spread: spreadOf(samples) },
    ];
  } finally {
    await plane.stop();
  }
}

function assertRunning(gate: GateProcess): void {
  if (gate.lines.some((l) => l.level === 'error' || l.level === 'fatal')) throw new Error(`the gate failed before its watch opened:\n${gate.output()}`);
}
