import type { V1Node } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd, isPodReady, RolloutWorld, UPGRADING } from './harness.ts';

const kc = sharedCluster().kubeConfig();
const world = new RolloutWorld(kc, 'roll');
const POOLS = { a: 3, b: 2 } as const; // pool b: 20% of 10 nodes
const ORDER = ['unknown', 'upgrade-done', 'upgrade-required', 'cordon-required', 'wait-for-jobs-required', 'pod-deletion-required', 'drain-required', 'pod-restart-required', 'validation-required', 'uncordon-required', 'upgrade-done'];
let port = 0;
const run = promisify(execFile);

/** The states an "updated node state label" Event names: the stored one, after the path its write passed ("…[X]: A → B (why) → X"). */
function pathOf(message: string): string[] {
  const match = /label to \[([a-z-]+)\](?:: (.*))?$/.exec(message);
  if (match === null) return [];
  return match[2] === undefined ? [match[1] ?? ''] : match[2].split(' → ').map((step) => step.replace(/ \(.*\)$/, ''));
}

function statesNamed(rows: readonly { message: string }[]): Set<string> {
  return new Set(rows.flatMap((r) => pathOf(r.message)));
}

beforeAll(async () => {
  await installCrd(kc);
  await world.setUp(Array.from({ length: 20 }, (_, i) => ({ labels: { pool: i < 10 ? 'a' : 'b' } })));
  await world.createDriver('driver:v1');
  await world.createRollout({
    upgradePolicy: {
      maxParallelUpgrades: 0,
      maxUnavailable: 1,
      podDeletion: { enable: false },
      drain: { enable: true, force: true, timeoutSeconds: 30 },
    },
    pools: [
      { name: 'a', nodeSelector: { matchLabels: { pool: 'a' } }, maxUnavailable: POOLS.a },
      { name: 'b', nodeSelector: { matchLabels: { pool: 'b' } }, maxUnavailable: '20%' },
    ],
  });
  ({ port } = await world.startCoordinator());
});

afterAll(async () => {
  await world.tearDown();
});

function poolOf(node: V1Node): 'a' | 'b' {
  return node.metadata?.labels?.pool === 'a' ? 'a' : 'b';
}

describe('a complete rollout on the real control plane', () => {
  it('labels every node with a current driver pod upgrade-done', async () => {
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])));
  });

  it('upgrades 20 nodes in two pools to the new driver, never exceeding a pool’s maxUnavailable', async () => {
    for (const name of world.nodeNames) await world.createPod(name, `work-${name.slice(-2)}`);
    const sequences = new Map<string, string[]>();
    const peak = { a: 0, b: 0 };
    const watch = await world.watchNodes((nodes) => {
      const out = { a: 0, b: 0 };
      for (const node of nodes.values()) {
        const name = node.metadata?.name ?? '';
        const state = world.stateOf(node);
        const seq = sequences.get(name) ?? [];
        if (seq.at(-1) !== state) seq.push(state);
        sequences.set(name, seq);
        if (node.spec?.unschedulable === true || UPGRADING.has(state)) out[poolOf(node)] += 1;
      }
      peak.a = Math.max(peak.a, out.a);
      peak.b = Math.max(peak.b, out.b);
      return out.a > POOLS.a || out.b > POOLS.b ? `out of service: a=${out.a}/${POOLS.a} b=${out.b}/${POOLS.b}` : undefined;
    });
    const started = Date.now();
    await world.bumpDriver('driver:v2');

    await waitUntil('every driver pod at v2 and every node upgrade-done and schedulable', async () => {
      const pods = await world.driverPods();
      if (pods.length !== 20 || !pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === 'driver:v2')) return undefined;
      const nodes = await world.nodes();
      return nodes.every((n) => world.stateOf(n) === 'upgrade-done' && n.spec?.unschedulable !== true) ? true : undefined;
    }, { timeoutMs: 120_000, intervalMs: 200 });
    const seconds = (Date.now() - started) / 1000;
    watch.stop();

    expect(watch.violations).toEqual([]);
    expect(peak.a).toBeGreaterThan(1); // the pool limits, not the top-level 1, applied
    expect(peak.b).toBeGreaterThan(1);
    const pods = await world.driverPods();
    expect(pods.filter(isPodReady)).toHaveLength(20);
    expect(new Set(pods.map((p) => p.spec?.containers[0]?.image))).toEqual(new Set(['driver:v2']));
    const workloads = (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'workload=true' })).items;
    expect(workloads).toEqual([]);
    for (const [node, seq] of sequences) {
      // Every node went through the states in the seed documents' order and ended upgrade-done.
      let at = 0;
      for (const state of seq) {
        const found = ORDER.indexOf(state, at);
        expect(found, `${node}: ${seq.join(' → ')}`).toBeGreaterThanOrEqual(0);
        at = found;
      }
      expect(seq).toContain('cordon-required');
      expect(seq).toContain('pod-restart-required');
      expect(seq.at(-1)).toBe('upgrade-done');
    }
    process.stderr.write(`[coordinator] 20-node rollout in ${seconds.toFixed(1)} s, ${watch.events()} node events, peak out of service a=${peak.a} b=${peak.b}\n`);
  });

  it('records GPU-Operator-worded Events that name every state each node passed, in order, as seed 002 greps them', async () => {
    // Seed 002: `kubectl get events --sort-by='.lastTimestamp' | grep GPUDriverUpgrade`. States
    // passed in one write (nothing to do there) are not stored, but the Event of that write names
    // them: every state of the flow is on record for every node.
    const reason = `${world.driver.toUpperCase()}DriverUpgrade`;
    const flow = ['upgrade-required', 'cordon-required', 'wait-for-jobs-required', 'pod-deletion-required', 'drain-required', 'pod-restart-required', 'validation-required', 'uncordon-required', 'upgrade-done'];
    let rows: { node: string; message: string }[] = [];
    // Events go out beside the writes: the last node's may land after the test saw the label.
    await waitUntil('Events naming every state of the flow on every node', async () => {
      const { stdout } = await run(join(sharedCluster().binDir, 'kubectl'), [
        `--kubeconfig=${sharedCluster().kubeconfigPath}`, 'get', 'events', '-n', 'default', '--sort-by=.lastTimestamp', '--no-headers',
        '-o', 'custom-columns=NODE:.involvedObject.name,REASON:.reason,MESSAGE:.message',
      ]);
      rows = stdout.split('\n').filter((line) => line.includes(reason)).map((line) => {
        const [node = '', , ...message] = line.split(/\s+/);
        return { node, message: message.join(' ') };
      });
      return world.nodeNames.every((n) => flow.every((s) => statesNamed(rows.filter((r) => r.node === n)).has(s))) ? true : undefined;
    }, { timeoutMs: 60_000, intervalMs: 500 }).catch((error: unknown) => {
      throw new Error(`${String(error)}; seen: ${JSON.stringify(rows.slice(0, 40))}`);
    });
    for (const { node, message } of rows) {
      expect(message, node).toMatch(/^Successfully updated node state label to \[[a-z-]+\]/);
      // Each write's path follows the seed documents' order.
      const path = pathOf(message);
      let at = 0;
      for (const state of path) {
        const found = ORDER.indexOf(state, at);
        expect(found, `${node}: ${message}`).toBeGreaterThanOrEqual(0);
        at = found;
      }
    }
    // The first node to start carries upgrade-required too (named by its cordon-required Event).
    const example = rows.find((r) => r.message.includes('upgrade-done → upgrade-required → cordon-required'));
    expect(example, JSON.stringify(rows.slice(0, 20))).toBeDefined();
  });

  it('reports the outcome in the DriverRollout status and on /metrics', async () => {
    const status = await world.waitForStatus('20 nodes done', (s) => (s.nodes as { done?: number } | undefined)?.done === 20);
    expect(status.observedGeneration).toBe((await world.rollout()).metadata?.generation);
    expect(status.nodes).toMatchObject({ total: 20, done: 20, failed: 0, inProgress: 0 });
    const conditions = status.conditions as { type: string; status: string }[];
    expect(conditions.find((c) => c.type === 'Complete')?.status).toBe('True');
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(text).toContain(`driver_rollout_nodes_upgrades_done{namespace="${world.ns.name}",rollout="driver",driver="${world.driver}"} 20`);
    expect(text).toMatch(new RegExp(`driver_rollout_node_upgrade_duration_seconds_count\\{driver="${world.driver}"\\} 20`));
    expect(text).toContain('driver_rollout_coordinator_is_leader 1');
  });
});
