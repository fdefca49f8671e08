import { AppsV1Api, CoreV1Api, CustomObjectsApi, loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCachedBuild } from '../../bed/ensure-binaries.ts';
import { ensureHelm } from '../../bed/ensure-helm.ts';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { createTestNamespace, type TestNamespace } from '../../bed/test-namespace.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { installCrd } from '../coordinator/harness.ts';
import { uniqueTestId } from '../test-bed/fixtures.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');
const CHART = join(ROOT, 'charts/driver-rollout');
const cluster = sharedCluster();
const kc = cluster.kubeConfig();
const kubectl = join(cluster.binDir, 'kubectl');
const id = uniqueTestId('chart');
/** Keeps the chart's coordinator pods Pending: the shared cluster's KWOK nodes belong to other tests. */
const NO_NODE = `coordinator.nodeSelector.driver-rollout\\.test/nowhere=${id}`;
const MONITORING = 'metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true';
let helm = '';
/** prometheus-operator's ServiceMonitor and PrometheusRule CRDs (test/bed/fetch-prometheus-operator-crds.sh). */
let monitoringCrds = '';
let ns: TestNamespace;
const gpuNode = `${id}-gpu`;
const plainNode = `${id}-plain`;

async function helmTemplate(release: string, namespace: string, ...args: string[]): Promise<KubernetesObject[]> {
  const { stdout } = await run(helm, ['template', release, CHART, '--namespace', namespace, ...args], { maxBuffer: 16 * 1024 * 1024 });
  return (loadAllYaml(stdout) as (KubernetesObject | null)[]).filter((d): d is KubernetesObject => d !== null);
}

beforeAll(async () => {
  [helm, monitoringCrds] = await Promise.all([ensureHelm(), runCachedBuild(join(ROOT, 'test/bed/fetch-prometheus-operator-crds.sh'))]);
  await installCrd(kc);
  ns = await createTestNamespace(kc, 'chart');
});

afterAll(async () => {
  await deleteFakeNodes(kc, [gpuNode, plainNode]);
  await ns.delete();
});

describe('the Helm chart', () => {
  it('passes helm lint --strict, with default values and with the monitoring objects on', async () => {
    const started = performance.now();
    const { stdout } = await run(helm, ['lint', '--strict', CHART]);
    expect(stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    await run(helm, ['lint', '--strict', CHART, '--set', 'metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true']);
    process.stderr.write(`[chart] helm lint (twice) took ${Math.round(performance.now() - started)} ms\n`);
  });

  it('is what deploy/kustomize and the chart CRD hold (scripts/render-manifests.sh --check)', async () => {
    const started = performance.now();
    await run('bash', [join(ROOT, 'scripts/render-manifests.sh'), '--check']).catch((error: unknown) => {
      throw new Error(`deploy/kustomize is stale; run npm run manifests\n${(error as { stdout?: string }).stdout ?? ''}`, { cause: error });
    });
    process.stderr.write(`[chart] render + compare took ${Math.round(performance.now() - started)} ms\n`);
  });

  it('refuses values its schema forbids, naming the field', async () => {
    await expect(run(helm, ['template', 'x', CHART, '--set', 'drivers[0].pciVendor=nvidia'])).rejects.toThrow(/pciVendor/);
    await expect(run(helm, ['template', 'x', CHART, '--set', 'coordinator.replica=3'])).rejects.toThrow(/replica/);
    await expect(run(helm, ['template', 'x', CHART, '--set', 'drivers[1].preset=nvidia-580'])).rejects.toThrow(/preset/);
  });

  it('grants the coordinator patch and update on exactly the DaemonSets of the drivers whose failed canary it rolls back, and passes their canary on', async () => {
    const byDefault = await helmTemplate('driver-rollout', 'ops');
    expect(byDefault.filter((d) => d.metadata?.name === 'driver-rollout-coordinator-canary-rollback')).toEqual([]);
    // --set on a list entry replaces the list: gpu alone, as a user who lists the drivers writes it.
    const values = ['--set', 'drivers[0].name=gpu,drivers[0].enabled=true,drivers[0].preset=nvidia,drivers[0].onCanaryFailure=Rollback,drivers[0].canary.nodes=2,drivers[0].canary.then=Continue,drivers[0].canary.soakSeconds=300'];
    const rendered = await helmTemplate('driver-rollout', 'ops', ...values);
    const role = rendered.find((d) => d.kind === 'Role' && d.metadata?.name === 'driver-rollout-coordinator-canary-rollback') as KubernetesObject & { rules: unknown[] };
    expect(role.metadata?.namespace).toBe('ops');
    expect(role.rules).toEqual([{ apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['driver-rollout-gpu'], verbs: ['patch', 'update'] }]);
    const binding = rendered.find((d) => d.kind === 'RoleBinding' && d.metadata?.name === 'driver-rollout-coordinator-canary-rollback') as KubernetesObject & { subjects: unknown[] };
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'driver-rollout-coordinator', namespace: 'ops' }]);
    const rollouts = rendered.filter((d) => d.kind === 'DriverRollout') as (KubernetesObject & { spec: Record<string, unknown> })[];
    expect(rollouts.map((r) => [r.metadata?.name, r.spec.canary, r.spec.onCanaryFailure])).toEqual([['driver-rollout-gpu', { nodes: 2, then: 'Continue', soakSeconds: 300 }, 'Rollback']]);
    await expect(run(helm, ['template', 'x', CHART, '--set', 'drivers[0].name=gpu,drivers[0].enabled=true,drivers[0].preset=nvidia,drivers[0].onCanaryFailure=Retry'])).rejects.toThrow(/onCanaryFailure/);
  });

  it('passes drivers[].alertGate to its DriverRollout and lets the coordinator get exactly the Secrets and ConfigMaps alert gates name, by name', async () => {
    const none = await helmTemplate('driver-rollout', 'ops');
    expect(none.filter((d) => d.metadata?.name?.endsWith('-alert-gate') === true)).toEqual([]);
    // --set on drivers[0] replaces the list: the entry is given whole.
    const gate = 'drivers[0].name=gpu,drivers[0].enabled=true,drivers[0].preset=nvidia,drivers[0].alertGate.url=https://prometheus.monitoring:9090,drivers[0].alertGate.bearerTokenSecretRef.name=prom-token,drivers[0].alertGate.bearerTokenSecretRef.key=token,'
      + 'drivers[0].alertGate.tls.ca.configMapKeyRef.name=prom-ca,drivers[0].alertGate.tls.ca.configMapKeyRef.key=ca.crt,'
      + 'coordinator.alertGateSecrets[0].namespace=team-a,coordinator.alertGateSecrets[0].name=their-token';
    const objects = await helmTemplate('driver-rollout', 'ops', '--set', gate);
    const rollout = objects.find((d) => d.kind === 'DriverRollout' && (d as { spec?: { driverName?: string } }).spec?.driverName === 'gpu') as { spec?: { alertGate?: unknown } } | undefined;
    expect(rollout?.spec?.alertGate).toEqual({ url: 'https://prometheus.monitoring:9090', bearerTokenSecretRef: { name: 'prom-token', key: 'token' }, tls: { ca: { configMapKeyRef: { name: 'prom-ca', key: 'ca.crt' } } } });
    const roles = objects.filter((d) => d.kind === 'Role' && d.metadata?.name === 'driver-rollout-coordinator-alert-gate') as (KubernetesObject & { rules: unknown[] })[];
    expect(roles.map((r) => [r.metadata?.namespace, r.rules])).toEqual([
      ['ops', [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['prom-token'], verbs: ['get'] }, { apiGroups: [''], resources: ['configmaps'], resourceNames: ['prom-ca'], verbs: ['get'] }]],
      ['team-a', [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['their-token'], verbs: ['get'] }]],
    ]);
    const bindings = objects.filter((d) => d.kind === 'RoleBinding' && d.metadata?.name === 'driver-rollout-coordinator-alert-gate') as (KubernetesObject & { subjects: unknown[] })[];
    expect(bindings.map((b) => [b.metadata?.namespace, b.subjects])).toEqual([
      ['ops', [{ kind: 'ServiceAccount', name: 'driver-rollout-coordinator', namespace: 'ops' }]],
      ['team-a', [{ kind: 'ServiceAccount', name: 'driver-rollout-coordinator', namespace: 'ops' }]],
    ]);
  });

  it('renders a ServiceMonitor and a PrometheusRule (stuck, node failed, halted) only when asked', async () => {
    const off = await helmTemplate('driver-rollout', 'ops');
    expect(off.filter((d) => d.kind === 'ServiceMonitor' || d.kind === 'PrometheusRule')).toEqual([]);
    const on = await helmTemplate('driver-rollout', 'ops', '--set', 'metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true');
    const rule = on.find((d) => d.kind === 'PrometheusRule') as KubernetesObject & { spec: { groups: { rules: { alert: string; expr: string }[] }[] } };
    expect(rule.spec.groups[0]?.rules.map((r) => r.alert)).toEqual(['DriverRolloutNodeFailed', 'DriverRolloutHalted', 'DriverRolloutStuck']);
    expect(rule.spec.groups[0]?.rules.map((r) => r.expr).join('\n')).toMatch(/driver_rollout_nodes_upgrades_failed[\s\S]*driver_rollout_halted[\s\S]*driver_rollout_nodes_upgrades_done/);
    const monitor = on.find((d) => d.kind === 'ServiceMonitor') as KubernetesObject & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] } };
    expect(monitor).toMatchObject({ spec: { endpoints: [{ port: 'metrics', honorLabels: true }] } });
    // It selects exactly the coordinator's metrics Service, by labels that Service carries, and a port it names.
    const selected = on.filter((d) => d.kind === 'Service' && Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => d.metadata?.labels?.[k] === v)) as (KubernetesObject & { spec: { ports: { name: string }[] } })[];
    expect(selected.map((d) => d.metadata?.name)).toEqual(['driver-rollout-coordinator-metrics']);
    expect(selected[0]?.spec.ports.map((p) => p.name)).toContain(monitor.spec.endpoints[0]?.port);
  });

  it('applies to a real API server without warnings, the ServiceMonitor and PrometheusRule to prometheus-operator\'s CRDs; a driver pod lands only on the node NFD labels with the device', async () => {
    const release = `r${id}`;
    // kubectl validates strictly: an unknown or mistyped field of the monitoring objects is an error.
    const crds = await run(kubectl, [`--kubeconfig=${cluster.kubeconfigPath}`, 'apply', '--server-side', '--force-conflicts', '-f', monitoringCrds]);
    expect(crds.stderr).toBe('');
    await run(kubectl, [`--kubeconfig=${cluster.kubeconfigPath}`, 'wait', '--for=condition=Established', '--timeout=120s',
      'crd/servicemonitors.monitoring.coreos.com', 'crd/prometheusrules.monitoring.coreos.com']);
    const started = performance.now();
    const objects = await helmTemplate(release, ns.name, '--set', NO_NODE, '--set', MONITORING);
    expect(objects.filter((o) => o.kind === 'ServiceMonitor' || o.kind === 'PrometheusRule').map((o) => o.kind).sort()).toEqual(['PrometheusRule', 'ServiceMonitor']);
    const rendered = objects.map((o) => JSON.stringify(o)).join('\n');
    const file = join(await mkdtemp(join(tmpdir(), 'chart-')), 'rendered.json');
    await writeFile(file, rendered);
    process.stderr.write(`[chart] helm template took ${Math.round(performance.now() - started)} ms (${objects.length} objects)\n`);
    try {
      const { stdout, stderr } = await run(kubectl, [`--kubeconfig=${cluster.kubeconfigPath}`, 'apply', '-f', file]);
      expect(stderr).toBe('');
      expect(stdout.trim().split('\n')).toHaveLength(objects.length);
      const custom = kc.makeApiClient(CustomObjectsApi);
      const stored = (await custom.getNamespacedCustomObject({ group: 'monitoring.coreos.com', version: 'v1', namespace: ns.name, plural: 'prometheusrules', name: `${release}-driver-rollout-coordinator` })) as { spec: unknown };
      expect(stored.spec).toEqual((objects.find((o) => o.kind === 'PrometheusRule') as KubernetesObject & { spec: unknown }).spec);
      await custom.getNamespacedCustomObject({ group: 'monitoring.coreos.com', version: 'v1', namespace: ns.name, plural: 'servicemonitors', name: `${release}-driver-rollout-coordinator` });

      await createFakeNodes(kc, [
        { name: gpuNode, labels: { 'feature.node.kubernetes.io/pci-10de.present': 'true' } },
        { name: plainNode, labels: {} },
      ]);
      const apps = kc.makeApiClient(AppsV1Api);
      const core = kc.makeApiClient(CoreV1Api);
      await waitUntil('the GPU driver DaemonSet to schedule one pod', async () => {
        const ds = await apps.readNamespacedDaemonSet({ name: `${release}-driver-rollout-gpu`, namespace: ns.name });
        return ds.status?.desiredNumberScheduled === 1 ? true : undefined;
      });
      // desiredNumberScheduled counts the node before the scheduler has bound the DaemonSet's pod.
      const pods = await waitUntil('the GPU driver pod to be bound to a node', async () => {
        const listed = (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app.kubernetes.io/component=driver' })).items;
        return listed.length > 0 && listed.every((p) => p.spec?.nodeName) ? listed : undefined;
      });
      expect(pods.map((p) => p.spec?.nodeName)).toEqual([gpuNode]);
      const nic = await apps.readNamespacedDaemonSet({ name: `${release}-driver-rollout-nic`, namespace: ns.name });
      expect(nic.status?.desiredNumberScheduled ?? 0).toBe(0);
      const rollouts = (await kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({ group: 'driverrollout.io', version: 'v1alpha1', namespace: ns.name, plural: 'driverrollouts' })) as { items: KubernetesObject[] };
      expect(rollouts.items.map((r) => r.metadata?.name).sort()).toEqual([`${release}-driver-rollout-gpu`, `${release}-driver-rollout-nic`]);
    } finally {
      await run(kubectl, [`--kubeconfig=${cluster.kubeconfigPath}`, 'delete', '--ignore-not-found', '--wait=false', '-f', file]);
      await rm(join(file, '..'), { recursive: true, force: true });
    }
  });

  it('builds as a kustomize base (kubectl kustomize) with the same objects as the chart', async () => {
    const { stdout } = await run(kubectl, ['kustomize', join(ROOT, 'deploy/kustomize')], { maxBuffer: 16 * 1024 * 1024 });
    const built = (loadAllYaml(stdout) as KubernetesObject[]).map((o) => `${o.kind ?? ''}/${o.metadata?.name ?? ''}`).sort();
    const chart = (await helmTemplate('driver-rollout', 'driver-rollout')).map((o) => `${o.kind ?? ''}/${o.metadata?.name ?? ''}`);
    expect(built).toEqual([...chart, 'Namespace/driver-rollout'].sort());
    const crd = await run(kubectl, ['kustomize', join(ROOT, 'deploy/kustomize/crd')]);
    expect(crd.stdout).toContain('name: driverrollouts.driverrollout.io');
  });
});
