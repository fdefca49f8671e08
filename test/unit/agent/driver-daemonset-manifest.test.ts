import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { V1Container, V1DaemonSet, V1EnvVar } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { agentEnvironmentVariables, parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import { driverKeys } from '../../../shared/keys.ts';

const MANIFEST = resolve(import.meta.dirname, '../../../manifests/driver-daemonset.yaml');
const ds = parse(await readFile(MANIFEST, 'utf8')) as V1DaemonSet;
const spec = ds.spec?.template.spec;
const agent = spec?.containers.find((c) => c.name === 'agent');

/** The environment the kubelet would give the container on node `n1` for pod `p1`. */
function resolvedEnv(container: V1Container | undefined): Record<string, string> {
  const fieldValues: Record<string, string> = { 'spec.nodeName': 'n1', 'metadata.name': 'p1', 'metadata.namespace': 'driver-rollout' };
  return Object.fromEntries(
    (container?.env ?? []).map((e: V1EnvVar) => [e.name, e.value ?? fieldValues[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '']),
  );
}

describe('manifests/driver-daemonset.yaml', () => {
  const env = resolvedEnv(agent);

  it('is a DaemonSet only the coordinator restarts (OnDelete)', () => {
    expect(ds.kind).toBe('DaemonSet');
    expect(ds.spec?.updateStrategy?.type).toBe('OnDelete');
    const selector = Object.entries(ds.spec?.selector.matchLabels ?? {});
    expect(selector.length).toBeGreaterThan(0);
    const labels = ds.spec?.template.metadata?.labels ?? {};
    for (const [key, value] of selector) expect(labels[key]).toBe(value);
  });

  it("declares the agent's readiness gate for its driver and domain", () => {
    const keys = driverKeys(env.DRIVER_NAME ?? '', env.KEY_DOMAIN);
    expect(spec?.readinessGates).toEqual([{ conditionType: keys.driverReadyCondition }]);
  });

  it('gives the agent only variables it reads, and a configuration it accepts', () => {
    const unknown = Object.keys(env).filter((name) => !agentEnvironmentVariables().includes(name));
    expect(unknown).toEqual([]);
    const config = parseAgentConfig([], env);
    expect(config).toMatchObject({ nodeName: 'n1', podName: 'p1', podNamespace: 'driver-rollout', kernelAdapter: 'real', unloadOnStop: false });
  });

  it('probes /readyz (startup, readiness) and /healthz (liveness) on the agent port', () => {
    const port = agent?.ports?.find((p) => p.name === 'http')?.containerPort;
    expect(String(port)).toBe(env.HTTP_PORT);
    expect(agent?.startupProbe?.httpGet?.path).toBe('/readyz');
    expect(agent?.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect(agent?.livenessProbe?.httpGet?.path).toBe('/healthz');
  });

  it('removes the ready file in preStop, and allows an unload on stop a long grace period', () => {
    expect(agent?.lifecycle?.preStop?.exec?.command).toEqual(['rm', '-f', env.READY_FILE]);
    expect(spec?.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(300);
  });

  it('mounts the host paths the agent writes: ready file and lock, modules, modprobe.d, cache', () => {
    const mounts = (agent?.volumeMounts ?? []).map((m) => m.mountPath);
    const under = (path: string | undefined) => mounts.some((m) => path !== undefined && (path === m || path.startsWith(`${m}/`)));
    for (const path of [env.READY_FILE, env.LOCK_PATH, env.CACHE_DIR, env.MODPROBE_CONFIG_DIR, '/lib/modules', '/sys']) expect(under(path), path).toBe(true);
    const volumes = new Set((spec?.volumes ?? []).map((v) => v.name));
    for (const m of [...(agent?.volumeMounts ?? []), ...(spec?.initContainers ?? []).flatMap((c) => c.volumeMounts ?? [])]) {
      expect(volumes.has(m.name), m.name).toBe(true);
    }
  });

  it('runs the init container with the settings the safe-load gate reads', () => {
    const init = spec?.initContainers?.[0];
    expect(init?.command).toEqual(['node', 'init-container/main.ts']);
    expect(Object.keys(resolvedEnv(init)).sort()).toEqual(
      ['DRIVER_NAME', 'KEY_DOMAIN', 'NODE_NAME', 'PREFLIGHT_MODULES', 'SAFE_LOAD_ENABLED', 'SYS_MODULE_ROOT', 'WAIT_TIMEOUT_SECONDS'].sort(),
    );
    expect(spec?.serviceAccountName).toBe('driver-rollout-driver');
  });
});
