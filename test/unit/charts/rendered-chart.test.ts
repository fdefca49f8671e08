import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COORDINATOR_ALLOCATOR_ENV } from '../../../coordinator/allocator-env.ts';

/**
 * Checks on deploy/kustomize/driver-rollout.yaml, the chart rendered with its default values
 * (scripts/render-manifests.sh; test/integration/charts/helm-chart.test.ts fails when it is not
 * a fresh render): what the chart installs keeps the permissions and the admission policy of
 * manifests/, which the least-privilege integration tests exercise.
 */
const ROOT = resolve(import.meta.dirname, '../../..');

type Doc = KubernetesObject & { rules?: unknown; spec?: Record<string, unknown>; subjects?: unknown[]; roleRef?: unknown };

async function docs(path: string): Promise<Doc[]> {
  return (loadAllYaml(await readFile(resolve(ROOT, path), 'utf8')) as (Doc | null)[]).filter((d): d is Doc => d !== null);
}

const rendered = await docs('deploy/kustomize/driver-rollout.yaml');
const find = (kind: string, name: string): Doc => {
  const found = rendered.find((d) => d.kind === kind && d.metadata?.name === name);
  if (found === undefined) throw new Error(`${kind} ${name} not rendered`);
  return found;
};
const manifest = async (path: string, kind: string, namespace?: string): Promise<Doc> => {
  const found = (await docs(path)).find((d) => d.kind === kind && (namespace === undefined || d.metadata?.namespace === namespace));
  if (found === undefined) throw new Error(`${path} has no ${kind}`);
  return found;
};

describe('the chart rendered with default values (deploy/kustomize)', () => {
  it('grants the coordinator exactly the rules of manifests/coordinator.yaml', async () => {
    expect(find('ClusterRole', 'driver-rollout-coordinator').rules).toEqual((await manifest('manifests/coordinator.yaml', 'ClusterRole')).rules);
    expect(find('Role', 'driver-rollout-coordinator-leader-election').rules).toEqual((await manifest('manifests/coordinator.yaml', 'Role')).rules);
  });

  it('grants the driver pods exactly the rules of manifests/driver-rbac.yaml', async () => {
    expect(find('ClusterRole', 'driver-rollout-driver').rules).toEqual((await manifest('manifests/driver-rbac.yaml', 'ClusterRole')).rules);
    expect(find('Role', 'driver-rollout-driver').rules).toEqual((await manifest('manifests/driver-rbac.yaml', 'Role', 'driver-rollout')).rules);
    const events = find('Role', 'driver-rollout-driver-node-events');
    expect(events.metadata?.namespace).toBe('default');
    expect(events.rules).toEqual((await manifest('manifests/driver-rbac.yaml', 'Role', 'default')).rules);
  });

  it('has the admission policy of manifests/safe-load-policy.yaml, matching only its own driver service account', async () => {
    const shipped = await manifest('manifests/safe-load-policy.yaml', 'ValidatingAdmissionPolicy');
    const policy = find('ValidatingAdmissionPolicy', 'driver-rollout-driver-scope');
    for (const field of ['failurePolicy', 'matchConstraints', 'variables', 'validations']) expect(policy.spec?.[field], field).toEqual(shipped.spec?.[field]);
    expect(policy.spec?.matchConditions).toEqual([
      { name: 'is-driver-service-account', expression: "request.userInfo.username == 'system:serviceaccount:driver-rollout:driver-rollout-driver'" },
    ]);
    expect(find('ValidatingAdmissionPolicyBinding', 'driver-rollout-driver-scope').spec).toEqual({ policyName: 'driver-rollout-driver-scope', validationActions: ['Deny'] });
  });

  it('runs the coordinator as in manifests/coordinator.yaml: 2 replicas, non-root, read-only root FS, resources, a PDB and a metrics Service', () => {
    const deployment = find('Deployment', 'driver-rollout-coordinator') as Doc & { spec: { replicas: number; template: { spec: { securityContext: unknown; containers: { securityContext: unknown; resources: unknown; args: string[] }[] } } } };
    const pod = deployment.spec.template.spec;
    expect(deployment.spec.replicas).toBe(2);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532 });
    expect(pod.containers[0]?.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    expect(pod.containers[0]?.resources).toEqual({ requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '1Gi' } });
    expect(pod.containers[0]?.args).toEqual(['--namespace=driver-rollout', '--lease-name=driver-rollout-coordinator', '--metrics-port=8080']);
    expect(find('PodDisruptionBudget', 'driver-rollout-coordinator').spec).toMatchObject({ maxUnavailable: 1 });
    expect(find('Service', 'driver-rollout-coordinator-metrics').spec).toMatchObject({ ports: [{ name: 'metrics', port: 8080 }] });
  });

  it('runs the coordinator with the malloc settings of coordinator/allocator-env.ts, as manifests/coordinator.yaml does', async () => {
    type Container = { env: { name: string; value?: string }[] };
    const envOf = (d: Doc): Record<string, string | undefined> =>
      Object.fromEntries((d.spec as { template: { spec: { containers: Container[] } } }).template.spec.containers[0]?.env.map((e) => [e.name, e.value]) ?? []);
    const rendered = envOf(find('Deployment', 'driver-rollout-coordinator'));
    const plain = envOf(await manifest('manifests/coordinator.yaml', 'Deployment'));
    for (const [name, value] of Object.entries(COORDINATOR_ALLOCATOR_ENV)) {
      expect(rendered[name], name).toBe(value);
      expect(plain[name], name).toBe(value);
    }
  });

  it('has one driver DaemonSet and one DriverRollout per driver, on the nodes NFD labels with the device', () => {
    const daemonSets = rendered.filter((d) => d.kind === 'DaemonSet') as (Doc & { spec: { updateStrategy: unknown; template: { spec: { nodeSelector: unknown; readinessGates: unknown } } } })[];
    expect(daemonSets.map((d) => [d.metadata?.name, d.spec.template.spec.nodeSelector, d.spec.template.spec.readinessGates, d.spec.updateStrategy])).toEqual([
      ['driver-rollout-gpu', { 'kubernetes.io/os': 'linux', 'feature.node.kubernetes.io/pci-10de.present': 'true' }, [{ conditionType: 'nvidia.com/gpu-driver-ready' }], { type: 'OnDelete' }],
      ['driver-rollout-nic', { 'kubernetes.io/os': 'linux', 'feature.node.kubernetes.io/pci-10ec.present': 'true' }, [{ conditionType: 'nvidia.com/nic-driver-ready' }], { type: 'OnDelete' }],
    ]);
    const rollouts = rendered.filter((d) => d.kind === 'DriverRollout');
    expect(rollouts.map((r) => [r.metadata?.name, r.spec?.driverName, r.spec?.selector])).toEqual([
      ['driver-rollout-gpu', 'gpu', { matchLabels: { 'app.kubernetes.io/name': 'driver-rollout-gpu', 'app.kubernetes.io/instance': 'driver-rollout' } }],
      ['driver-rollout-nic', 'nic', { matchLabels: { 'app.kubernetes.io/name': 'driver-rollout-nic', 'app.kubernetes.io/instance': 'driver-rollout' } }],
    ]);
  });

  it('ships the CRD of manifests/ unchanged, in the chart and in the kustomize base', async () => {
    const crd = await readFile(resolve(ROOT, 'manifests/driverrollout-crd.yaml'), 'utf8');
    const stale = 'a copy of manifests/driverrollout-crd.yaml is stale: run npm run manifests';
    expect(await readFile(resolve(ROOT, 'charts/driver-rollout/crds/driverrollout-crd.yaml'), 'utf8'), stale).toBe(crd);
    expect(await readFile(resolve(ROOT, 'deploy/kustomize/crd/driverrollout-crd.yaml'), 'utf8'), stale).toBe(crd);
  });
});
