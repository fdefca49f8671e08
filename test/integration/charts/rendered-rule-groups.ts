import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { runCachedBuild } from '../../bed/ensure-binaries.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly annotations: { readonly summary: string; readonly description: string };
}
export interface RuleGroup {
  readonly name: string;
  readonly rules: readonly AlertRule[];
}

/** The rule groups of the chart's PrometheusRule (`helm template`, default values, the rule on): what a Prometheus rule file holds. */
export async function renderedRuleGroups(): Promise<RuleGroup[]> {
  const helm = await runCachedBuild(join(ROOT, 'test/bed/build-helm.sh'));
  const { stdout } = await run(helm, ['template', 'driver-rollout', join(ROOT, 'charts/driver-rollout'), '--namespace', 'ops', '--set', 'metrics.prometheusRule.enabled=true'], {
    maxBuffer: 16 * 1024 * 1024,
  });
  const rule = (loadAllYaml(stdout) as (KubernetesObject | null)[]).find((d) => d?.kind === 'PrometheusRule') as (KubernetesObject & { spec: { groups: RuleGroup[] } }) | undefined;
  if (rule === undefined) throw new Error('helm template rendered no PrometheusRule');
  return rule.spec.groups;
}
