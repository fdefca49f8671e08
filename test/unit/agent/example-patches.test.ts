import { readdir, readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { V1DaemonSet, V1EnvVar } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { agentEnvironmentVariables, parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';

const MANIFESTS = resolve(import.meta.dirname, '../../../manifests');
const base = parse(await readFile(resolve(MANIFESTS, 'driver-daemonset.yaml'), 'utf8')) as V1DaemonSet;
const patches = (await readdir(resolve(MANIFESTS, 'examples'))).filter((f) => f.endsWith('.patch.yaml')).sort();

/** The agent's env after a strategic-merge patch (env entries merge by name), as the kubelet resolves it on node n1. */
async function patchedEnv(file: string): Promise<Record<string, string>> {
  const patch = parse(await readFile(resolve(MANIFESTS, 'examples', file), 'utf8')) as V1DaemonSet;
  const agentOf = (ds: V1DaemonSet) => ds.spec?.template.spec?.containers.find((c) => c.name === 'agent');
  const merged = new Map<string, V1EnvVar>();
  for (const e of [...(agentOf(base)?.env ?? []), ...(agentOf(patch)?.env ?? [])]) merged.set(e.name, e);
  const fields: Record<string, string> = { 'spec.nodeName': 'n1', 'metadata.name': 'p1', 'metadata.namespace': 'driver-rollout' };
  return Object.fromEntries([...merged.values()].map((e) => [e.name, e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '']));
}

describe('manifests/examples/*.patch.yaml', () => {
  it('there are GPU and NIC examples', () => {
    expect(patches).toEqual(expect.arrayContaining(['gpu-nvidia-dkms.patch.yaml', 'nic-mofed-dkms.patch.yaml']));
  });

  it.each(patches)('%s patched onto driver-daemonset.yaml gives a configuration the agent accepts, with a dkms recipe', async (file) => {
    const env = await patchedEnv(file);
    expect(Object.keys(env).filter((name) => !agentEnvironmentVariables().includes(name))).toEqual([]);
    const config = parseAgentConfig([], env);
    expect(config.recipe.kind).toBe('dkms');
  });
});
