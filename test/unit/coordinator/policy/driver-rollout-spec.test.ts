import { describe, expect, it } from 'vitest';
import { DEFAULT_DEVICE_RESOURCE_PREFIXES, parseDriverRolloutSpec } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { SPEC_SAMPLES } from './spec-samples.ts';

describe('parseDriverRolloutSpec', () => {
  it.each(SPEC_SAMPLES.filter((s) => s.invalidAt === null).map((s) => [s.name, s] as const))('accepts %s', (_name, sample) => {
    const result = parseDriverRolloutSpec(sample.spec);
    expect(result.ok ? [] : result.problems).toEqual([]);
  });

  it.each(SPEC_SAMPLES.filter((s) => s.invalidAt !== null).map((s) => [s.name, s] as const))('rejects %s, naming the field', (_name, sample) => {
    const result = parseDriverRolloutSpec(sample.spec);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problems.map((p) => p.path)).toContain(sample.invalidAt);
  });

  it('reports every problem at once', () => {
    const result = parseDriverRolloutSpec({
      driverName: 'GPU',
      selector: {},
      upgradePolicy: { maxUnavailable: '120%', drain: { timeoutSeconds: -1 } },
      pools: [{ name: 'a', nodeSelector: {} }, { name: 'a', nodeSelector: {} }],
    });
    expect(result.ok ? [] : result.problems.map((p) => p.path)).toEqual([
      'spec.driverName',
      'spec.selector',
      'spec.upgradePolicy.maxUnavailable',
      'spec.upgradePolicy.drain.timeoutSeconds',
      'spec.pools[1].name',
    ]);
  });

  it('applies the GPU Operator defaults and compiles selectors', () => {
    const result = parseDriverRolloutSpec({ driverName: 'gpu', selector: { matchLabels: { app: 'gpu-driver' } } });
    if (!result.ok) throw new Error('expected a valid spec');
    const p = result.policy;
    expect(p.keyDomain).toBe('nvidia.com');
    expect(p.keys.upgradeState).toBe('nvidia.com/gpu-driver-upgrade-state');
    expect(p.eventReason).toBe('GPUDriverUpgrade');
    expect(p.autoUpgrade).toBe(true);
    expect(p.defaultPool).toEqual({ name: 'default', nodeSelector: null, maxUnavailable: { kind: 'percent', value: 25 }, maxParallelUpgrades: 1 });
    expect(p.waitForCompletion).toEqual({ podSelector: null, timeoutSeconds: 0 });
    // On by default, as the GPU Operator's gpuPodDeletion: a driver is never restarted under a GPU pod.
    expect(p.podDeletion).toEqual({ force: false, timeoutSeconds: 300, deleteEmptyDir: false });
    expect(p.podRestart).toEqual({ timeoutSeconds: 900, failAfterSeconds: 120 });
    expect(p.devicePods).toEqual({ resourcePrefixes: DEFAULT_DEVICE_RESOURCE_PREFIXES, podSelector: null });
    expect(p.drain).toMatchObject({ enable: false, force: false, timeoutSeconds: 300, deleteEmptyDir: false });
    expect(p.drain.podSelector.requirements).toEqual([]);
    expect(p.validation).toEqual({ podSelector: null, timeoutSeconds: 600 });
    const off = parseDriverRolloutSpec({ driverName: 'gpu', selector: { matchLabels: { app: 'd' } }, upgradePolicy: { podDeletion: { enable: false } } });
    expect(off.ok && off.policy.podDeletion).toBeNull();
    expect(p.maxFailedNodes).toBeNull();
    expect(p.priorityLabel).toBeNull();
    expect(p.pools).toEqual([]);
  });

  it('gives pools the top-level limits unless they set their own', () => {
    const result = parseDriverRolloutSpec({
      driverName: 'ofed',
      selector: { matchLabels: { app: 'ofed' } },
      upgradePolicy: { maxUnavailable: 2, maxParallelUpgrades: 3, podDeletion: {} },
      pools: [{ name: 'a', nodeSelector: { matchLabels: { rack: 'a' } } }, { name: 'b', nodeSelector: {}, maxUnavailable: '10%', maxParallelUpgrades: 0 }],
    });
    if (!result.ok) throw new Error('expected a valid spec');
    expect(result.policy.pools.map((p) => [p.name, p.maxUnavailable, p.maxParallelUpgrades])).toEqual([
      ['a', { kind: 'count', value: 2 }, 3],
      ['b', { kind: 'percent', value: 10 }, 0],
    ]);
    expect(result.policy.podDeletion).toEqual({ force: false, timeoutSeconds: 300, deleteEmptyDir: false });
  });
});
