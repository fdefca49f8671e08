import type { KubernetesObject } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { runCachedBuild } from '../bed/ensure-binaries.ts';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const CHART = join(REPO, 'charts', 'driver-rollout');
/** Apply order: what others refer to first; the DriverRollout once its CRD and DaemonSet exist. */
const ORDER = ['CustomResourceDefinition', 'Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding',
  'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'Service', 'PodDisruptionBudget', 'Deployment', 'DaemonSet', 'DriverRollout'];

/** What the chart is installed with here, in the chart's own values (charts/driver-rollout/values.yaml). */
export interface ChartSite {
  readonly namespace: string;
  readonly nodeSelector: Readonly<Record<string, string>>;
  /** The node's work dir: the agent's writable host paths go under `<hostDir>/host/`. */
  readonly hostDir: string;
  /**
   * `as-shipped`: every driver of the default values with its preset as shipped, only scheduled to
   * the real node (no NFD here); `gpu-drain` (default): the GPU driver alone, drain on and pod
   * deletion off, so that the first install's drain runs.
   */
  readonly drivers?: 'as-shipped' | 'gpu-drain';
}

/**
 * `helm template` of the chart as a user installs it (CRDs included), with values only for what
 * this machine needs: the GPU driver only (this machine has no NIC for the OFED example either),
 * on the real node, drain on (pod deletion off, so that the drain runs), the writable host paths under the node's work dir, the
 * coordinator (its two replicas, PodDisruptionBudget and metrics port as by default) on the real node. Objects in apply order.
 */
export async function chartObjects(site: ChartSite): Promise<KubernetesObject[]> {
  const helm = await runCachedBuild(join(REPO, 'test/bed/build-helm.sh'));
  const values = parse(await readFile(join(CHART, 'values.yaml'), 'utf8')) as {
    coordinator: Record<string, unknown>;
    hostPaths: Record<string, string>;
    drivers: { name: string; enabled: boolean; nodeSelector: Record<string, string>; upgradePolicy?: { drain?: Record<string, unknown>; podDeletion?: Record<string, unknown> } }[];
  };
  values.coordinator = { ...values.coordinator, nodeSelector: site.nodeSelector };
  for (const key of ['runDriverRollout', 'modprobeD', 'moduleCache', 'driverState', 'etcModprobeD'] as const) {
    const path = values.hostPaths[key];
    if (path === undefined) throw new Error(`chart values have no hostPaths.${key}`);
    values.hostPaths[key] = join(site.hostDir, 'host', path);
  }
  for (const d of values.drivers) {
    d.nodeSelector = { ...site.nodeSelector };
    if (site.drivers === 'as-shipped') continue;
    d.enabled = d.name === 'gpu';
    // Drain the node (pod deletion off: with it on, a node without device pods skips the drain).
    d.upgradePolicy = { ...d.upgradePolicy, drain: { ...d.upgradePolicy?.drain, enable: true }, podDeletion: { ...d.upgradePolicy?.podDeletion, enable: false } };
  }
  const dir = await mkdtemp(join(tmpdir(), 'drtest-chart-'));
  try {
    await writeFile(join(dir, 'values.yaml'), stringify(values));
    const { stdout } = await run(helm, ['template', 'driver-rollout', CHART, '--namespace', site.namespace, '--include-crds', '-f', join(dir, 'values.yaml')], {
      maxBuffer: 64 * 1024 * 1024,
    });
    const objects = parseAllDocuments(stdout).map((d) => d.toJS() as KubernetesObject | null).filter((o): o is KubernetesObject => o !== null);
    const rank = (o: KubernetesObject): number => {
      const i = ORDER.indexOf(o.kind ?? '');
      return i < 0 ? ORDER.length : i;
    };
    return objects.sort((a, b) => rank(a) - rank(b));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
