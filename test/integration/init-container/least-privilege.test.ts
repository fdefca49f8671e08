import { AdmissionregistrationV1Api, AuthenticationV1Api, CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driverKeys } from '../../../shared/keys.ts';
import { apiErrorMessage, apiStatusCode } from '../../../shared/kube/api-error.ts';
import { MERGE_PATCH, STRATEGIC_MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { TEST_NODE_LABEL, uniqueTestId } from '../test-bed/fixtures.ts';
import { applyDriverSecurity, waitForDriverPolicy, type DriverSecurity } from './apply-driver-security.ts';
import { runGateProcess } from './run-gate-process.ts';
import { tokenKubeConfig } from './token-kube-config.ts';

// manifests/driver-rbac.yaml + manifests/safe-load-policy.yaml on the shared `full` cluster:
// the driver service account, with a token bound to its pod on node A, runs the real init
// container on A, and the admission policy refuses everything else it could do with RBAC alone.

const keys = driverKeys('gpu');
const admin = sharedCluster().kubeConfig();
const core = admin.makeApiClient(CoreV1Api);
const id = uniqueTestId('gate-lp');
const nodeA = `${id}-a`;
const nodeB = `${id}-b`;
let ns: TestNamespace;
let security: DriverSecurity;
let scratch: string;
let kubeconfigPath: string;
let driverCore: CoreV1Api;
let userExtra: Record<string, string[]> = {};

function driverPod(name: string, node: string): V1Pod {
  return {
    metadata: { name, labels: { app: 'driver' } },
    spec: {
      serviceAccountName: security.serviceAccount,
      nodeName: node,
      automountServiceAccountToken: false,
      containers: [{ name: 'agent', image: 'driver-rollout/agent:test' }],
    },
  };
}

beforeAll(async () => {
  ns = await createTestNamespace(admin, 'gate-lp');
  security = await applyDriverSecurity(admin, ns.name, id);
  await createFakeNodes(admin, [
    { name: nodeA, labels: { [TEST_NODE_LABEL]: id } },
    { name: nodeB, labels: { [TEST_NODE_LABEL]: id } },
  ]);
  const podA = await core.createNamespacedPod({ namespace: ns.name, body: driverPod('driver-a', nodeA) });
  await core.createNamespacedPod({ namespace: ns.name, body: driverPod('driver-b', nodeB) });
  // What the kubelet does for a projected service-account token: a TokenRequest bound to the pod.
  const request = await core.createNamespacedServiceAccountToken({
    name: security.serviceAccount,
    namespace: ns.name,
    body: { spec: { audiences: [], expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'driver-a', uid: podA.metadata?.uid ?? '' } } },
  });
  scratch = await mkdtemp(join(tmpdir(), 'gate-lp-'));
  kubeconfigPath = join(scratch, 'driver.kubeconfig');
  await writeFile(kubeconfigPath, tokenKubeConfig(admin, request.status?.token ?? ''));
  const driverKc = new KubeConfig();
  driverKc.loadFromFile(kubeconfigPath);
  driverCore = driverKc.makeApiClient(CoreV1Api);
  const review = await driverKc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
  userExtra = review.status?.userInfo?.extra ?? {};
  await waitForDriverPolicy('the safe-load admission policy to be enforced', () =>
    driverCore.patchNode({ name: nodeB, dryRun: 'All', body: { metadata: { annotations: { [keys.waitForSafeLoad]: 'true' } } } }, MERGE_PATCH));
}, 180_000);

afterAll(async () => {
  await ns.delete();
  await deleteFakeNodes(admin, [nodeA, nodeB]);
  await security.delete();
  await rm(scratch, { recursive: true, force: true });
});

async function driverPatchNode(node: string, metadataOrSpec: object): Promise<void> {
  await driverCore.patchNode({ name: node, body: metadataOrSpec }, MERGE_PATCH);
}

async function outcome(action: () => Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await action();
    return { status: 200, message: '' };
  } catch (error) {
    return { status: apiStatusCode(error) ?? -1, message: apiErrorMessage(error) };
  }
}

describe('driver service account with a token bound to its pod on node A', () => {
  it('carries the node-name claim of a pod-bound token (ServiceAccountTokenPodNodeInfo)', () => {
    expect(userExtra['authentication.kubernetes.io/node-name']).toEqual([nodeA]);
    expect(userExtra['authentication.kubernetes.io/pod-name']).toEqual(['driver-a']);
  });

  it('the shipped policy type-checks without warnings', async () => {
    const policy = await waitUntil('the policy to be type-checked', async () => {
      const p = await admin.makeApiClient(AdmissionregistrationV1Api).readValidatingAdmissionPolicy({ name: security.policyName });
      return p.status?.observedGeneration === p.metadata?.generation ? p : undefined;
    });
    expect(policy.status?.typeChecking?.expressionWarnings ?? []).toEqual([]);
  });

  it('runs the real init container on node A: it sets the annotation and exits 0 once it is removed', async () => {
    const gate = runGateProcess({ KUBECONFIG: kubeconfigPath, NODE_NAME: nodeA, DRIVER_NAME: 'gpu', SAFE_LOAD_ENABLED: 'true' });
    await waitUntil('the gate to mark node A', async () => ((await core.readNode({ name: nodeA })).metadata?.annotations?.[keys.waitForSafeLoad] === 'true' ? true : undefined));
    await core.patchNode({ name: nodeA, body: { metadata: { annotations: { [keys.waitForSafeLoad]: null } } } }, MERGE_PATCH);
    const { code } = await gate.exited;
    expect(code, gate.output()).toBe(0);
  });

  it('the init container on node B with node A\'s token is refused at once, naming the node and the policy', async () => {
    const gate = runGateProcess({ KUBECONFIG: kubeconfigPath, NODE_NAME: nodeB, DRIVER_NAME: 'gpu', SAFE_LOAD_ENABLED: 'true' });
    const { code } = await gate.exited;
    expect(code).toBe(1);
    expect(gate.lines.at(-1)?.msg).toMatch(new RegExp(`not allowed to patch nodes "${nodeB}".*may change only the node its pod runs on \\(token bound to node "${nodeA}"\\)`));
  });

  it.each<{ name: string; node: () => string; before?: () => Promise<void>; patch: object; allowed: boolean; message?: RegExp }>([
    { name: 'set the safe-load annotation on its own node', node: () => nodeA, patch: { metadata: { annotations: { [keys.waitForSafeLoad]: 'true' } } }, allowed: true },
    { name: 'set the agent labels on its own node', node: () => nodeA, patch: { metadata: { labels: { [keys.devicePresent]: 'true', [keys.deviceCount]: '8', [keys.driverVersion]: '570.86.15', [keys.driverReady]: 'false' } } }, allowed: true },
    { name: 'remove an agent label on its own node', node: () => nodeA, patch: { metadata: { labels: { [keys.deviceCount]: null } } }, allowed: true },
    { name: 'set the safe-load annotation on another node', node: () => nodeB, patch: { metadata: { annotations: { [keys.waitForSafeLoad]: 'true' } } }, allowed: false, message: /may change only the node its pod runs on/ },
    { name: 'set an agent label on another node', node: () => nodeB, patch: { metadata: { labels: { [keys.devicePresent]: 'true' } } }, allowed: false, message: /may change only the node its pod runs on/ },
    { name: 'set another annotation on its own node', node: () => nodeA, patch: { metadata: { annotations: { 'example.com/other': 'x' } } }, allowed: false, message: /may only set the annotation nvidia.com\/<driver>-driver-upgrade.driver-wait-for-safe-load to "true"/ },
    {
      name: 'lift its own safe-load gate (remove the annotation)',
      node: () => nodeA,
      before: async () => { await core.patchNode({ name: nodeA, body: { metadata: { annotations: { [keys.waitForSafeLoad]: 'true' } } } }, MERGE_PATCH); },
      patch: { metadata: { annotations: { [keys.waitForSafeLoad]: null } } },
      allowed: false,
      message: /may only set the annotation/,
    },
    { name: 'set the safe-load annotation to something other than "true"', node: () => nodeA, patch: { metadata: { annotations: { [keys.waitForSafeLoad]: 'false' } } }, allowed: false, message: /may only set the annotation/ },
    { name: 'change the upgrade-state label', node: () => nodeA, patch: { metadata: { labels: { [keys.upgradeState]: 'upgrade-done' } } }, allowed: false, message: /may only change driver-rollout.io\/ labels/ },
    { name: 'set the upgrade skip label', node: () => nodeA, patch: { metadata: { labels: { [keys.upgradeSkip]: 'true' } } }, allowed: false, message: /may only change driver-rollout.io\/ labels/ },
    { name: 'set the GPU Operator and GFD label nvidia.com/gpu.present', node: () => nodeA, patch: { metadata: { labels: { 'nvidia.com/gpu.present': 'true' } } }, allowed: false, message: /may only change driver-rollout.io\/ labels/ },
    { name: 'change a label of another domain', node: () => nodeA, patch: { metadata: { labels: { [TEST_NODE_LABEL]: 'moved' } } }, allowed: false, message: /may only change driver-rollout.io\/ labels/ },
    { name: 'cordon its own node', node: () => nodeA, patch: { spec: { unschedulable: true } }, allowed: false, message: /may not change the spec/ },
    { name: 'taint its own node', node: () => nodeA, patch: { spec: { taints: [{ key: 'x', effect: 'NoSchedule' }] } }, allowed: false, message: /may not change the spec/ },
    { name: 'add a finalizer to its own node', node: () => nodeA, patch: { metadata: { finalizers: ['example.com/hold'] } }, allowed: false, message: /finalizers/ },
  ])('may $name: allowed=$allowed', async ({ node, before, patch, allowed, message }) => {
    await before?.();
    const result = await outcome(() => driverPatchNode(node(), patch));
    if (allowed) {
      expect(result).toEqual({ status: 200, message: '' });
      return;
    }
    expect(result.status).toBe(403);
    expect(result.message).toMatch(/ValidatingAdmissionPolicy '.*' with binding '.*' denied request: driver-rollout: /);
    expect(result.message).toMatch(message ?? /./);
  });

  it('may not delete a node (RBAC grants no delete)', async () => {
    const result = await outcome(() => driverCore.deleteNode({ name: nodeA }));
    expect(result.status).toBe(403);
    expect(result.message).toMatch(/cannot delete resource "nodes"/);
  });

  it.each([
    { pod: 'driver-a', allowed: true },
    { pod: 'driver-b', allowed: false },
  ])('may patch the status of pod $pod: allowed=$allowed (only its own)', async ({ pod, allowed }) => {
    const condition = { type: 'nvidia.com/gpu-driver-ready', status: 'False', reason: 'Building', message: 'test', lastTransitionTime: new Date() };
    const result = await outcome(() =>
      driverCore.patchNamespacedPodStatus({ name: pod, namespace: ns.name, body: { status: { conditions: [condition] } } }, STRATEGIC_MERGE_PATCH),
    );
    if (allowed) expect(result).toEqual({ status: 200, message: '' });
    else {
      expect(result.status).toBe(403);
      expect(result.message).toMatch(/may change only the status of its own pod \(token bound to pod "driver-a"\), not pod "driver-b"/);
    }
  });
});
