/**
 * Safe-load gate latency: the coordinator removes the wait-for-safe-load annotation → the init
 * container (init-container/main.ts, a real process) exits 0. Measured from the API server's
 * answer to the removal to the process exit, over many runs against an `api` control plane.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { driverKeys } from '../../shared/keys.ts';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import { startControlPlane } from '../../test/bed/control-plane.ts';
import { runGateProcess } from '../../test/integration/init-container/run-gate-process.ts';
import type { Figure } from '../lib/results.ts';
import { quantile, spreadOf } from '../lib/stats.ts';

const keys = driverKeys('gpu');

export async function gateFigures(runs: number, log: (line: string) => void): Promise<Figure[]> {
  const plane = await startControlPlane({ profile: 'api' });
  try {
    const core = plane.kubeConfig().makeApiClient(CoreV1Api);
    const node = 'bench-gate';
    await core.createNode({ body: { metadata: { name: node, labels: { [keys.upgradeState]: 'upgrade-required' } } } });
    const samples: number[] = [];
    for (let run = 0; run < runs; run++) {
      const gate = runGateProcess({ KUBECONFIG: plane.kubeconfigPath, NODE_NAME: node, DRIVER_NAME: 'gpu', SAFE_LOAD_ENABLED: 'true', LOG_LEVEL: 'debug' });
      await gate.waitForLine((l) => l.msg === 'watching node');
      await sleep(200); // the log line comes as the watch request goes out
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
