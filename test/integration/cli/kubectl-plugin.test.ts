import { CoreV1Api, PolicyV1Api } from '@kubernetes/client-node';
import { execFile, spawn } from 'node:child_process';
import { lstat, mkdtemp, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRIVER_ROLLOUT_GROUP, DRIVER_ROLLOUT_PLURAL, DRIVER_ROLLOUT_VERSION } from '../../../coordinator/policy/driver-rollout-spec.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd, RolloutWorld } from '../coordinator/harness.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');
const cluster = sharedCluster();
const kc = cluster.kubeConfig();
const world = new RolloutWorld(kc, 'plugin');
const crd = { group: DRIVER_ROLLOUT_GROUP, version: DRIVER_ROLLOUT_VERSION, plural: DRIVER_ROLLOUT_PLURAL };
const NOW_S = Math.floor(Date.now() / 1000);
/** kubectl finds the plugin on PATH (cli/kubectl-driver_rollout), as after `npm install -g`. */
const ENV = { ...process.env, PATH: `${join(ROOT, 'cli')}:${process.env.PATH ?? ''}`, KUBECONFIG: cluster.kubeconfigPath };

interface Result {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `kubectl driver-rollout ARGS` through the test bed's kubectl, as a user types it. */
async function plugin(args: readonly string[], env: Record<string, string> = {}): Promise<Result> {
  try {
    const { stdout, stderr } = await run(join(cluster.binDir, 'kubectl'), ['driver-rollout', ...args], { env: { ...ENV, ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

const node = (i: number): string => world.nodeNames[i] ?? '';

beforeAll(async () => {
  await installCrd(kc);
  await world.setUp([{}, {}, {}]);
  await world.createDriver('driver:v1');
  await world.createRollout({ pools: [{ name: 'a', nodeSelector: { matchLabels: { [`pool-${world.id}`]: 'a' } } }] });
  const k = world.keys;
  const label = async (i: number, labels: Record<string, string>, annotations: Record<string, string> = {}, unschedulable = false): Promise<void> => {
    await world.core.patchNode({ name: node(i), body: { metadata: { labels, annotations }, spec: { unschedulable } } }, MERGE_PATCH);
  };
  await label(0, { [k.upgradeState]: 'upgrade-done', [k.driverVersion]: '2.0.0', [`pool-${world.id}`]: 'a' }, { [k.stateStartTime]: String(NOW_S - 300) });
  await label(1, { [k.upgradeState]: 'drain-required', [k.driverVersion]: '1.0.0' }, {
    [k.stateStartTime]: String(NOW_S - 75),
    [k.upgradeReason]: `drain: ${world.ns.name}/trainer refused eviction: PodDisruptionBudget ${world.ns.name}/trainer allows 0 disruptions`,
  }, true);
  await label(2, { [k.upgradeState]: 'upgrade-failed', [k.driverVersion]: '1.0.0' }, { [k.upgradeReason]: 'validation: timed out after 600 s' });
  await world.custom.patchNamespacedCustomObjectStatus(
    {
      ...crd,
      namespace: world.ns.name,
      name: 'driver',
      body: {
        status: {
          paused: false,
          halted: false,
          progress: '1/3',
          nodes: { total: 3, done: 1, failed: 1, inProgress: 1, pending: 0, available: 0 },
          // Written at most once a second, the status may trail the nodes: node 0 is done, yet
          // still listed as restarting its driver pod.
          waiting: [{ node: node(0), state: 'pod-restart-required', reason: 'restarting the driver pod (timeout 900s)' }],
        },
      },
    },
    MERGE_PATCH,
  );
  // A workload pod on node 1 guarded by a PDB that allows no disruption, and an Event about the node.
  await world.core.createNamespacedPod({ namespace: world.ns.name, body: { metadata: { name: 'trainer', labels: { app: 'trainer' } }, spec: { nodeName: node(1), containers: [{ name: 't', image: 'trainer' }] } } });
  await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({ namespace: world.ns.name, body: { metadata: { name: 'trainer' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'trainer' } } } } });
  await world.core.createNamespacedEvent({
    namespace: 'default',
    body: {
      metadata: { generateName: `${node(1)}.` },
      involvedObject: { kind: 'Node', name: node(1), apiVersion: 'v1' },
      reason: 'TDRIVERDriverUpgrade',
      message: 'Successfully updated node state label to [drain-required]',
      type: 'Normal',
      lastTimestamp: new Date(),
      firstTimestamp: new Date(),
      count: 1,
      source: { component: 'test' },
    },
  });
  await waitUntil('the PDB to be computed', async () => {
    const pdb = await kc.makeApiClient(PolicyV1Api).readNamespacedPodDisruptionBudget({ name: 'trainer', namespace: world.ns.name });
    return pdb.status?.currentHealthy === 1 ? true : undefined;
  }, { timeoutMs: 60_000, intervalMs: 250 });
});

afterAll(async () => {
  await world.tearDown();
});

describe('kubectl driver-rollout (through kubectl, against a real API server)', () => {
  it('status: a progress bar, then per node pool, state, time in state, driver version and reason (none for a done node, whatever a trailing status says)', async () => {
    const r = await plugin(['status', '-n', world.ns.name, '--width', '160']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trimEnd().split('\n');
    process.stderr.write(`[plugin] status at 160 columns:\n${r.stdout}`);
    expect(lines[0]).toBe(`${world.ns.name}/driver · driver ${world.driver} · 1 failed · 1 in progress`);
    expect(lines[1]).toMatch(/^\[#{13}\.{27}\] 1\/3 done$/);
    expect(lines[2]).toMatch(/^NODE\s+POOL\s+STATE\s+AGE\s+DRIVER\s+REASON$/);
    expect(lines.find((l) => l.startsWith(node(0)))).toMatch(new RegExp(`^${node(0)}\\s+a\\s+done\\s+\\d+m\\d\\ds\\s+2\\.0\\.0$`));
    expect(lines.find((l) => l.startsWith(node(1)))).toMatch(/\s+default\s+drain \(cordoned\)\s+\d+m\d\ds\s+1\.0\.0\s+drain: .*\/trainer refused eviction/);
    expect(lines.find((l) => l.startsWith(node(2)))).toMatch(/\s+default\s+FAILED\s+-\s+1\.0\.0\s+validation: timed out after 600 s$/);
  });

  it('status on a 60-column terminal ($COLUMNS): no line is wider, reasons wrap under their node', async () => {
    const r = await plugin(['status', '-n', world.ns.name], { COLUMNS: '60' });
    process.stderr.write(`[plugin] status at 60 columns:\n${r.stdout}`);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(60);
    const failed = lines.findIndex((l) => l.startsWith(node(2)));
    expect(lines[failed + 1]).toBe('    validation: timed out after 600 s');
  });

  it('status -o json and -o yaml: the same views, for scripts', async () => {
    const json = await plugin(['status', 'driver', '-n', world.ns.name, '-o', 'json']);
    const parsed = JSON.parse(json.stdout) as { rollouts: { name: string; done: number; total: number; nodes: { name: string; state: string; driverVersion: string | null; cordoned: boolean }[] }[] };
    expect(parsed.rollouts).toHaveLength(1);
    // Sorted by pool ("a" before "default"), then name.
    expect(parsed.rollouts[0]?.nodes.map((n) => [n.name, n.state, n.driverVersion, n.cordoned])).toEqual([
      [node(0), 'upgrade-done', '2.0.0', false],
      [node(1), 'drain-required', '1.0.0', true],
      [node(2), 'upgrade-failed', '1.0.0', false],
    ]);
    const yaml = await plugin(['status', 'driver', '-n', world.ns.name, '-o', 'yaml']);
    expect(yaml.stdout).toContain(`- name: ${node(1)}`);
  });

  it('why NODE: the reason, the pod a drain would evict with the PDB blocking it, and the node Events', async () => {
    const r = await plugin(['why', node(1), '--width', '120']);
    process.stderr.write(`[plugin] why:\n${r.stdout}`);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`${node(1)} · ${world.ns.name}/driver \\(driver ${world.driver}\\) · drain-required for \\d+m\\d\\ds`));
    expect(r.stdout).toContain(`reason: drain: ${world.ns.name}/trainer refused eviction`);
    expect(r.stdout).toContain(`  ${world.ns.name}/trainer (no controller) · PDB trainer`);
    expect(r.stdout).toContain(`  ${world.ns.name}/trainer: 0 disruptions allowed, 1/1 healthy · BLOCKS EVICTION`);
    expect(r.stdout).toMatch(/Normal TDRIVERDriverUpgrade: Successfully updated node state label to \[drain-required\]/);
  });

  it('pause and resume set upgradePolicy.autoUpgrade', async () => {
    expect((await plugin(['pause', '-n', world.ns.name])).code).toBe(0);
    const paused = (await world.rollout()) as { spec?: { upgradePolicy?: { autoUpgrade?: boolean } } };
    expect(paused.spec?.upgradePolicy?.autoUpgrade).toBe(false);
    const resumed = await plugin(['resume', 'driver', '-n', world.ns.name]);
    expect(resumed.stdout).toBe(`driverrollout ${world.ns.name}/driver resumed (autoUpgrade=true)\n`);
    expect(((await world.rollout()) as { spec?: { upgradePolicy?: { autoUpgrade?: boolean } } }).spec?.upgradePolicy?.autoUpgrade).toBe(true);
  });

  it('skip and unskip set and remove the skip label; retry moves a failed node back to upgrade-required, and refuses others', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const labels = async (i: number): Promise<Record<string, string>> => (await core.readNode({ name: node(i) })).metadata?.labels ?? {};
    expect((await plugin(['skip', node(0)])).code).toBe(0);
    expect((await labels(0))[world.keys.upgradeSkip]).toBe('true');
    expect((await plugin(['unskip', node(0)])).code).toBe(0);
    expect((await labels(0))[world.keys.upgradeSkip]).toBeUndefined();
    const refused = await plugin(['retry', node(0)]);
    expect(refused).toMatchObject({ code: 1, stderr: `error: node ${node(0)} is in upgrade-done, not upgrade-failed: nothing to retry\n` });
    expect((await plugin(['retry', node(2)])).code).toBe(0);
    expect((await labels(2))[world.keys.upgradeState]).toBe('upgrade-required');
  });

  it('exits 2 with a clear message on a bad command line, 1 on an unknown context or node', async () => {
    expect(await plugin(['status', '--frobnicate'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^error: Unknown option '--frobnicate'.*\nSee 'kubectl driver-rollout --help'\.\n$/s) as unknown });
    expect(await plugin(['approve', 'a', 'b'])).toMatchObject({ code: 2, stderr: expect.stringContaining('approve takes at most 1 ROLLOUT') as unknown });
    expect(await plugin(['approve', '-n', world.ns.name])).toMatchObject({ code: 1, stderr: expect.stringContaining('has no canary waiting (status.canary is empty): nothing to approve') as unknown });
    expect(await plugin(['status', '--context', 'nope'])).toMatchObject({ code: 1, stderr: 'error: context "nope" does not exist in the kubeconfig\n' });
    expect(await plugin(['why', 'no-such-node'])).toMatchObject({ code: 1, stderr: expect.stringContaining('not found') as unknown });
    expect((await plugin(['--help'])).stdout).toContain('kubectl driver-rollout approve [ROLLOUT]');
  });

  it('status -w (not a terminal) appends a frame when a node moves, and stops on Ctrl-C (SIGINT)', async () => {
    const child = spawn(join(cluster.binDir, 'kubectl'), ['driver-rollout', 'status', '-n', world.ns.name, '-w', '--width', '100'], { env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const exited = new Promise<number | null>((settle) => child.on('exit', (code) => {
      settle(code);
    }));
    try {
      await waitUntil('the first frame', () => Promise.resolve(out.includes(node(2)) ? true : undefined), { timeoutMs: 30_000, intervalMs: 100 });
      await world.core.patchNode({ name: node(2), body: { metadata: { labels: { [world.keys.upgradeState]: 'cordon-required' } } } }, MERGE_PATCH);
      await waitUntil('a second frame with the new state', () => Promise.resolve(new RegExp(`\\n\\n[\\s\\S]*\\n${node(2)}\\s+default\\s+cordon\\s`).test(out) ? true : undefined), { timeoutMs: 30_000, intervalMs: 100 });
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  });

  it('installs with npm install -g as kubectl-driver_rollout on PATH', async () => {
    const prefix = await mkdtemp(join(tmpdir(), 'npm-prefix-'));
    try {
      await run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--offline', ROOT], { env: { ...process.env, npm_config_loglevel: 'error' } });
      const bin = join(prefix, 'bin', 'kubectl-driver_rollout');
      expect((await lstat(bin)).isSymbolicLink()).toBe(true);
      expect(await readlink(bin)).toMatch(/cli\/kubectl-driver_rollout$/);
      const { stdout } = await run(join(cluster.binDir, 'kubectl'), ['plugin', 'list'], { env: { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` } });
      expect(stdout).toContain(bin);
      const { stdout: help } = await run(bin, ['--help']);
      expect(help).toContain('kubectl driver-rollout status');
    } finally {
      await rm(prefix, { recursive: true, force: true });
    }
  });
});
