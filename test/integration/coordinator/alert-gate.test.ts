import type { V1Node } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { generatePki } from '../../bed/generate-pki.ts';
import { startPrometheus, type PrometheusServer } from '../../bed/prometheus-server.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { TEST_NODE_LABEL, useRolloutWorlds, type RolloutWorld } from './harness.ts';

// The alert gate (spec.alertGate, issue 35) against a real Prometheus (Debian bookworm's,
// test/bed/fetch-prometheus.sh) evaluating a test rule over a gauge this test serves and
// Prometheus scrapes every second: `TestGate` fires while test_gate > 0. The coordinator runs in
// this process on the real control plane, polling every 5 s (the least intervalSeconds).

const worlds = useRolloutWorlds({ beforeAll, afterEach });
const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../../..');

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;
const RULES = [{ name: 'driver-rollout-test-gate', rules: [{ alert: 'TestGate', expr: 'test_gate > 0' }, { alert: 'TestNoise', expr: 'test_gate >= 0' }] }];

/** An HTTP endpoint serving the gauge `test_gate`, set by the test; closed when the test ends. */
async function gauge(world: RolloutWorld): Promise<{ target: string; set: (value: number) => void }> {
  let value = 0;
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/plain; version=0.0.4');
    res.end(`# TYPE test_gate gauge\ntest_gate ${String(value)}\n`);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  world.onTearDown(async () => {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  });
  return { target: `127.0.0.1:${String((server.address() as AddressInfo).port)}`, set: (v) => { value = v; } };
}

async function alertState(prometheus: PrometheusServer, name: string): Promise<string> {
  return (await prometheus.alerts()).find((a) => a.labels.alertname === name)?.state ?? 'inactive';
}

const reasonOf = (world: RolloutWorld, node: V1Node | undefined): string => node?.metadata?.annotations?.[world.keys.upgradeReason] ?? '';

/** `kubectl driver-rollout status` as a user runs it (the plugin on PATH). */
async function pluginStatus(world: RolloutWorld): Promise<string> {
  const cluster = sharedCluster();
  const env = { ...process.env, PATH: `${join(ROOT, 'cli')}:${process.env.PATH ?? ''}`, KUBECONFIG: cluster.kubeconfigPath };
  const { stdout } = await run(join(cluster.binDir, 'kubectl'), ['driver-rollout', 'status', '-n', world.ns.name, '--width', '200'], { env });
  return stdout;
}

describe('the alert gate, against a real Prometheus', () => {
  it('a matching alert firing holds new starts (reason, status, kubectl driver-rollout status); resolving it resumes them with nothing else changed; Prometheus stopped holds them as unreachable', { timeout: 600_000 }, async () => {
    const world = worlds.create('gate');
    await world.setUp([{}]);
    await world.createDriver('driver:v1');
    const node = world.nodeNames[0] ?? '';
    const metric = await gauge(world);
    const prometheus = await startPrometheus({ targets: [metric.target], ruleGroups: RULES });
    world.onTearDown(() => prometheus.stop());
    // TestNoise fires all along and is ignored: only TestGate holds.
    await world.createRollout({ alertGate: { url: prometheus.url, alerts: ['Test.*'], ignore: ['TestNoise'], intervalSeconds: 5, timeoutSeconds: 2 } });
    // The coordinator's first poll already finds TestNoise firing: the gate must ignore it.
    await waitUntil('TestNoise to fire', async () => ((await alertState(prometheus, 'TestNoise')) === 'firing' ? true : undefined), { timeoutMs: HANG_MS, intervalMs: 500 });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    await world.waitForStatus('the gate open', (s) => (s.alertGate as { state?: string } | undefined)?.state === 'open', HANG_MS);
    expect(await alertState(prometheus, 'TestNoise')).toBe('firing');

    metric.set(1);
    await waitUntil('TestGate to fire', async () => ((await alertState(prometheus, 'TestGate')) === 'firing' ? true : undefined), { timeoutMs: HANG_MS, intervalMs: 500 });
    const closed = await world.waitForStatus('the gate firing', (s) => (s.alertGate as { state?: string } | undefined)?.state === 'firing', HANG_MS);
    expect(closed.alertGate).toEqual({ state: 'firing', message: 'alert firing: TestGate (alertGate holds new starts)' });

    // From the new revision until the alert resolves, the node never starts (a new leader term
    // holds it as `no answer yet` until its first poll: fails closed too).
    let firingNow = true;
    const watch = await world.watchNodes((nodes) => {
      const n = nodes.get(node);
      const state = n === undefined ? 'gone' : world.stateOf(n);
      return firingNow && (!['upgrade-done', 'upgrade-required'].includes(state) || n?.spec?.unschedulable === true) ? `started while TestGate fires: ${state}` : undefined;
    });
    await world.bumpDriver('driver:v2');
    await world.waitForNodes('the node held in upgrade-required by the alert', (nodes) =>
      world.stateOf(nodes[0] ?? {}) === 'upgrade-required' && reasonOf(world, nodes[0]) === 'alert firing: TestGate (alertGate holds new starts)' ? nodes : undefined, HANG_MS);
    // Held over two polls: the node does not start.
    await expectNoChange<V1Node>(world.kc, {
      path: '/api/v1/nodes',
      query: { labelSelector: `${TEST_NODE_LABEL}=${world.id}` },
      list: () => world.core.listNode({ labelSelector: `${TEST_NODE_LABEL}=${world.id}` }),
      forMs: 12_000,
      unwanted: (_type, n) => (world.stateOf(n) !== 'upgrade-required' || n.spec?.unschedulable === true ? `started while TestGate fires: ${world.stateOf(n)}` : undefined),
    });
    const status = await world.waitForStatus('the node listed as waiting', (s) => Array.isArray(s.waiting) && s.waiting.length > 0, HANG_MS);
    expect(status.waiting).toEqual([{ node, state: 'upgrade-required', reason: 'alert firing: TestGate (alertGate holds new starts)' }]);
    // As a user sees it (the status trails a pass; a leader term's first pass has no reading yet).
    const shown = await waitUntil('kubectl driver-rollout status to show the firing gate', async () => {
      const out = await pluginStatus(world);
      return out.includes('alert gate firing: alert firing: TestGate (alertGate holds new starts)') ? out : undefined;
    }, { timeoutMs: HANG_MS, intervalMs: 1_000 });
    expect(shown).toContain('ALERT GATE CLOSED');
    expect(shown).toMatch(/required .*alert firing: TestGate \(alertGate holds new starts\)/);

    // Resolved: the only change is the gauge; the node upgrades.
    expect(watch.violations).toEqual([]);
    firingNow = false;
    metric.set(0);
    await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    const [pod] = await world.driverPods();
    expect(pod?.spec?.containers[0]?.image).toBe('driver:v2');
    await world.waitForStatus('the gate open again', (s) => (s.alertGate as { state?: string } | undefined)?.state === 'open', HANG_MS);

    // Prometheus gone: fails closed, saying so (seen at the next poll; then the new revision comes).
    await prometheus.stop();
    const unreachableText = `alert gate cannot ask Prometheus at ${prometheus.url}: connect ECONNREFUSED ${prometheus.url.replace('http://', '')} (fails closed: no node starts)`;
    const gate = await world.waitForStatus('the gate unreachable', (s) => (s.alertGate as { state?: string } | undefined)?.state === 'unreachable', HANG_MS);
    expect(gate.alertGate).toEqual({ state: 'unreachable', message: unreachableText });
    await world.bumpDriver('driver:v3');
    const [unreachable] = await world.waitForNodes('the node held as unreachable', (nodes) =>
      world.stateOf(nodes[0] ?? {}) === 'upgrade-required' && reasonOf(world, nodes[0]) === unreachableText ? nodes : undefined, HANG_MS);
    expect(unreachable?.spec?.unschedulable).not.toBe(true);
  });

  it('over TLS, its CA from a ConfigMap and a bearer token from a Secret: unreadable Secret holds as unreachable naming it; once there, the firing alert holds; the token is in no status, reason or Event', { timeout: 600_000 }, async () => {
    const world = worlds.create('gatetls');
    await world.setUp([{}]);
    await world.createDriver('driver:v1');
    const node = world.nodeNames[0] ?? '';
    const dir = await mkdtemp(join(tmpdir(), 'drtest-gate-pki-'));
    world.onTearDown(() => rm(dir, { recursive: true, force: true }));
    const pki = await generatePki(dir);
    const metric = await gauge(world);
    metric.set(1);
    const prometheus = await startPrometheus({ targets: [metric.target], ruleGroups: RULES, tls: { certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.caCert } });
    world.onTearDown(() => prometheus.stop());
    expect(prometheus.url).toMatch(/^https:/);
    await waitUntil('TestGate to fire', async () => ((await alertState(prometheus, 'TestGate')) === 'firing' ? true : undefined), { timeoutMs: HANG_MS, intervalMs: 500 });
    const token = 'tok-7f3a9c-never-shown';
    await world.createRollout({ alertGate: {
      url: prometheus.url, alerts: ['TestGate'], intervalSeconds: 5, timeoutSeconds: 2,
      tls: { ca: { configMapKeyRef: { name: 'prom-ca', key: 'ca.crt' } } },
      bearerTokenSecretRef: { name: 'prom-token', key: 'token' },
    } });
    await world.startCoordinator();
    const missing = await world.waitForStatus('the gate unreachable: no Secret', (s) => (s.alertGate as { state?: string } | undefined)?.state === 'unreachable' && JSON.stringify(s.alertGate).includes('not found'), HANG_MS);
    expect(missing.alertGate).toEqual({ state: 'unreachable', message: `alert gate cannot ask Prometheus at ${prometheus.url}: Secret ${world.ns.name}/prom-token not found (fails closed: no node starts)` });

    await world.core.createNamespacedSecret({ namespace: world.ns.name, body: { metadata: { name: 'prom-token' }, stringData: { token: `${token}\n` } } });
    await world.core.createNamespacedConfigMap({ namespace: world.ns.name, body: { metadata: { name: 'prom-ca' }, data: { 'ca.crt': await readFile(pki.caCert, 'utf8') } } });
    const firing = await world.waitForStatus('the gate firing over TLS', (s) => (s.alertGate as { state?: string } | undefined)?.state === 'firing', HANG_MS);
    expect(firing.alertGate).toEqual({ state: 'firing', message: 'alert firing: TestGate (alertGate holds new starts)' });
    await world.bumpDriver('driver:v2');
    const [held] = await world.waitForNodes('the node held by the alert', (nodes) =>
      reasonOf(world, nodes[0]) === 'alert firing: TestGate (alertGate holds new starts)' ? nodes : undefined, HANG_MS);
    expect(world.stateOf(held ?? {})).toBe('upgrade-required');

    const everywhere = JSON.stringify([(await world.rollout()).status, await world.nodes(), await world.core.listNamespacedEvent({ namespace: world.ns.name }), await world.events(world.keys.upgradeState)]);
    expect(everywhere).not.toContain(token);
    expect(node).not.toBe('');
  });
});
