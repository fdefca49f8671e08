import { CoreV1Api } from '@kubernetes/client-node';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driverKeys } from '../../../shared/keys.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { startControlPlane, type ControlPlane } from '../../bed/control-plane.ts';
import { uniqueTestId } from '../test-bed/fixtures.ts';
import { runGateProcess, type GateProcess } from './run-gate-process.ts';
import { tokenKubeConfig } from './token-kube-config.ts';

// The real init container as a child process against its own `api` control plane (etcd +
// kube-apiserver): exit codes, latency, API server restart. No controller touches the node:
// the test plays the upgrade coordinator and removes the annotation itself.

const keys = driverKeys('gpu');
const FIXTURES = resolve(import.meta.dirname, '../../fixtures/sys-module');
let plane: ControlPlane;
let core: CoreV1Api;
let scratch: string;

beforeAll(async () => {
  plane = await startControlPlane({ profile: 'api' });
  core = plane.kubeConfig().makeApiClient(CoreV1Api);
  scratch = await mkdtemp(join(tmpdir(), 'gate-it-'));
}, 600_000);

afterAll(async () => {
  await plane.stop();
  await rm(scratch, { recursive: true, force: true });
});

async function aNode(): Promise<string> {
  const name = uniqueTestId('gate');
  await core.createNode({ body: { metadata: { name, labels: { [keys.upgradeState]: 'upgrade-required' } } } });
  return name;
}

function gateEnv(node: string, extra: Record<string, string> = {}): Record<string, string> {
  return { KUBECONFIG: plane.kubeconfigPath, NODE_NAME: node, DRIVER_NAME: 'gpu', SAFE_LOAD_ENABLED: 'true', LOG_LEVEL: 'debug', ...extra };
}

async function annotation(node: string): Promise<string | undefined> {
  return (await core.readNode({ name: node })).metadata?.annotations?.[keys.waitForSafeLoad];
}

/** The coordinator's move: remove the annotation. Returns when the API server acknowledged it. */
async function clearSafeLoad(node: string): Promise<number> {
  await core.patchNode({ name: node, body: { metadata: { annotations: { [keys.waitForSafeLoad]: null } } } }, MERGE_PATCH);
  return performance.now();
}

async function untilWatching(gate: GateProcess): Promise<void> {
  await gate.waitForLine((l) => l.msg === 'watching node', HANG_MS);
  // The log line comes as the request goes out; give the stream a moment to be established.
  await sleep(300);
}

/** Bounds on waits only catch a hang: starting a Node program on a loaded machine can take a minute. */
const HANG_MS = 120_000;

/** Fails at once if the gate says it is done within `forMs`: the "still waiting" check. */
async function expectStillWaiting(gate: GateProcess, forMs: number): Promise<void> {
  const early = await gate.waitForLine((l) => l.msg === 'safe to load the driver', forMs).then((l) => l, () => undefined);
  expect(early, gate.output()).toBeUndefined();
}

describe('init container against a real API server', () => {
  it('sets the annotation, blocks, and exits 0 right after the annotation is removed (latency measured)', async () => {
    const node = await aNode();
    const samples: number[] = [];
    for (let run = 0; run < 5; run += 1) {
      const gate = runGateProcess(gateEnv(node));
      await gate.waitForLine((l) => l.msg === 'node marked: waiting for safe load', HANG_MS);
      expect(await annotation(node)).toBe('true');
      await untilWatching(gate);
      await expectStillWaiting(gate, 500);
      const watches = gate.lines.filter((l) => l.msg === 'watching node').length;
      const acknowledged = await clearSafeLoad(node);
      const { code, at } = await gate.exited;
      expect(code, gate.output()).toBe(0);
      expect(gate.lines.at(-1)).toMatchObject({ msg: 'safe to load the driver', node, preflight: 'off' });
      expect(gate.lines.filter((l) => l.msg === 'watching node')).toHaveLength(watches);
      samples.push(at - acknowledged);
    }
    const sorted = [...samples].sort((a, b) => a - b);
    process.stdout.write(
      `[init-container] removal → exit latency over ${samples.length} runs (ms): ${samples.map((s) => s.toFixed(1)).join(', ')}; ` +
        `min ${sorted[0]?.toFixed(1)}, median ${sorted[2]?.toFixed(1)}, max ${sorted.at(-1)?.toFixed(1)}\n`,
    );
    // Each exit came from the open watch's event (no re-watch in between, checked above); the
    // latency figures are for the log: a loaded machine may take longer.
  });

  it('keeps waiting across an API server restart and exits 0 once the annotation is removed afterwards', async () => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node));
    await untilWatching(gate);
    const watchesBefore = gate.lines.filter((l) => l.msg === 'watching node').length;
    const restartStarted = performance.now();
    await plane.restartApiServer();
    const restartMs = performance.now() - restartStarted;
    // The gate must still be waiting: the restart dropped its watch, not the annotation.
    await expectStillWaiting(gate, 500);
    expect(await annotation(node)).toBe('true');
    // Wait until it has watched again, then clear, so the exit comes from a watch event.
    await gate.waitForLine(() => gate.lines.filter((x) => x.msg === 'watching node').length > watchesBefore, HANG_MS);
    await sleep(300);
    const acknowledged = await clearSafeLoad(node);
    const { code, at } = await gate.exited;
    expect(code, gate.output()).toBe(0);
    expect(gate.lines.some((l) => l.msg === 'node watch interrupted; re-watching')).toBe(true);
    process.stdout.write(
      `[init-container] API server restart took ${restartMs.toFixed(0)} ms; removal → exit after the restart: ${(at - acknowledged).toFixed(1)} ms\n`,
    );
  });

  it('logs every 30 s what it waits for and what it sees on the node', async () => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node, { LOG_LEVEL: 'info' }));
    await gate.waitForLine((l) => l.msg === 'node marked: waiting for safe load');
    // The coordinator cordons the node and moves it on while the gate waits.
    await core.patchNode({ name: node, body: { spec: { unschedulable: true }, metadata: { labels: { [keys.upgradeState]: 'drain-required' } } } }, MERGE_PATCH);
    const report = await gate.waitForLine((l) => l.msg === 'waiting for safe load', 40_000);
    expect(report).toMatchObject({ node, annotationValue: 'true', cordoned: true, upgradeState: 'drain-required', watch: 'open', waitedSeconds: 30 });
    expect(String(report.waitingFor)).toContain(keys.waitForSafeLoad);
    await clearSafeLoad(node);
    expect((await gate.exited).code).toBe(0);
  }, 60_000);

  it('stops promptly on SIGTERM with a clear message and exit code 143', async () => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node));
    await untilWatching(gate);
    const sent = performance.now();
    gate.kill('SIGTERM');
    const { code, at } = await gate.exited;
    expect(code).toBe(143);
    process.stdout.write(`[init-container] SIGTERM → exit: ${(at - sent).toFixed(0)} ms\n`);
    expect(gate.lines.at(-1)?.msg).toMatch(/^stopped \(received SIGTERM\) while waiting for annotation nvidia.com\/gpu-driver-upgrade.driver-wait-for-safe-load to be removed from node/);
  });

  it('gives up after WAIT_TIMEOUT_SECONDS with exit code 3', async () => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node, { WAIT_TIMEOUT_SECONDS: '1' }));
    const { code } = await gate.exited;
    expect(code).toBe(3);
    expect(gate.lines.at(-1)?.msg).toMatch(/timed out after 1 s \(WAIT_TIMEOUT_SECONDS\).*upgrade state: upgrade-required/);
  });

  it('fails with exit code 1 naming the node when it does not exist', async () => {
    const gate = runGateProcess(gateEnv('no-such-node'));
    const { code } = await gate.exited;
    expect(code).toBe(1);
    expect(gate.lines.at(-1)?.msg).toMatch(/node "no-such-node" not found \(patch nodes\)/);
  });

  it('fails at once with exit code 1 naming the node and the verb when RBAC denies the patch', async () => {
    const node = await aNode();
    const namespace = uniqueTestId('gate-rbac');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'no-rights' } } });
    const token = await core.createNamespacedServiceAccountToken({ name: 'no-rights', namespace, body: { spec: { audiences: [], expirationSeconds: 600 } } });
    const kubeconfig = join(scratch, `${namespace}.kubeconfig`);
    await writeFile(kubeconfig, tokenKubeConfig(plane.kubeConfig(), token.status?.token ?? ''));
    const gate = runGateProcess(gateEnv(node, { KUBECONFIG: kubeconfig }));
    const { code } = await gate.exited;
    expect(code).toBe(1);
    // At once: the first refusal ends it, no retry (a retried 403 would log 'failed; retrying').
    expect(gate.lines.filter((l) => /failed; retrying$/.test(l.msg)), gate.output()).toEqual([]);
    expect(gate.lines.at(-1)?.msg).toMatch(new RegExp(`not allowed to patch nodes "${node}".*cannot patch resource "nodes"`));
    await core.deleteNamespace({ name: namespace });
  });

  it('exits 0 at once when safe load is disabled, without touching the node', async () => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node, { SAFE_LOAD_ENABLED: 'false' }));
    expect((await gate.exited).code).toBe(0);
    expect(gate.lines.at(-1)?.msg).toBe('safe load disabled: the driver may load now');
    expect(await annotation(node)).toBeUndefined();
  });

  it.each<{ name: string; env: Record<string, string>; args?: string[]; fields: string[] }>([
    { name: 'missing node name', env: { NODE_NAME: '' }, fields: ['--node-name / NODE_NAME'] },
    { name: 'missing driver name', env: { DRIVER_NAME: '' }, fields: ['--driver-name / DRIVER_NAME'] },
    { name: 'bad driver name', env: { DRIVER_NAME: 'GPU!' }, fields: ['--driver-name / DRIVER_NAME'] },
    { name: 'bad key domain', env: { KEY_DOMAIN: '-x-' }, fields: ['--key-domain / KEY_DOMAIN'] },
    { name: 'bad annotation override', env: { SAFE_LOAD_ANNOTATION: 'a/b/c' }, fields: ['--safe-load-annotation / SAFE_LOAD_ANNOTATION'] },
    { name: 'safe load not a boolean', env: { SAFE_LOAD_ENABLED: 'on' }, fields: ['--safe-load-enabled / SAFE_LOAD_ENABLED'] },
    { name: 'bad timeout', env: { WAIT_TIMEOUT_SECONDS: '10s' }, fields: ['--wait-timeout-seconds / WAIT_TIMEOUT_SECONDS'] },
    { name: 'missing kubeconfig file', env: { KUBECONFIG: '/nonexistent' }, fields: ['--kubeconfig / KUBECONFIG'] },
    { name: 'bad pre-flight module', env: { PREFLIGHT_MODULES: 'nvidia;rm' }, fields: ['--preflight-modules / PREFLIGHT_MODULES'] },
    { name: 'relative sysfs root', env: { SYS_MODULE_ROOT: 'sys' }, fields: ['--sys-module-root / SYS_MODULE_ROOT'] },
    { name: 'bad log level', env: { LOG_LEVEL: 'chatty' }, fields: ['--log-level / LOG_LEVEL'] },
    { name: 'unknown flag', env: {}, args: ['--nodename=x'], fields: ['--nodename'] },
    { name: 'several at once', env: { SAFE_LOAD_ENABLED: 'yes', LOG_LEVEL: 'x' }, args: ['--wait-timeout-seconds=-3'], fields: ['--wait-timeout-seconds / WAIT_TIMEOUT_SECONDS', '--log-level / LOG_LEVEL', '--safe-load-enabled / SAFE_LOAD_ENABLED'] },
  ])('exits 2 on a bad config ($name), listing every problem and changing nothing', async ({ env, args, fields }) => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node, env), args);
    expect((await gate.exited).code, gate.output()).toBe(2);
    const line = gate.lines.at(-1);
    expect(line?.level).toBe('error');
    expect(line?.msg).toMatch(/^invalid init-container configuration: /);
    const problems = line?.problems as { path: string; message: string }[];
    expect(problems.map((p) => p.path).sort()).toEqual([...fields].sort());
    for (const p of problems) expect(p.message.length).toBeGreaterThan(10);
    expect(await annotation(node)).toBeUndefined();
  });

  it('exits 2 when the kubeconfig file exists but is not a kubeconfig, changing nothing', async () => {
    const node = await aNode();
    const broken = join(scratch, 'broken.kubeconfig');
    await writeFile(broken, 'this: [is not a kubeconfig');
    const gate = runGateProcess(gateEnv(node, { KUBECONFIG: broken }));
    expect((await gate.exited).code, gate.output()).toBe(2);
    expect(gate.lines.at(-1)).toMatchObject({ level: 'error', problems: [{ path: 'KUBECONFIG' }] });
    expect(await annotation(node)).toBeUndefined();
  });

  it.each([
    { tree: 'userspace-user', code: 4, last: /^driver is in use: nvidia \(refcnt 2, holders \[nvidia_uvm\], 1 user\(s\) outside the kernel\)$/ },
    { tree: 'kernel-holders-only', code: 0, last: /^safe to load the driver$/ },
  ])('pre-flight on the $tree fixture tree exits $code after the annotation is removed', async ({ tree, code, last }) => {
    const node = await aNode();
    const gate = runGateProcess(gateEnv(node, { PREFLIGHT_MODULES: 'nvidia_uvm,nvidia', SYS_MODULE_ROOT: join(FIXTURES, tree), WAIT_TIMEOUT_SECONDS: '4' }));
    await untilWatching(gate);
    await clearSafeLoad(node);
    const exit = await gate.exited;
    expect(exit.code, gate.output()).toBe(code);
    expect(gate.lines.at(-1)?.msg).toMatch(last);
  });
});
