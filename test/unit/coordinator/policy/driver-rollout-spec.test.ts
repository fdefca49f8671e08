import { describe, expect, it } from 'vitest';
import { GPU_RESOURCE_PREFIXES, NIC_RESOURCE_PREFIXES } from '../../../../coordinator/policy/device-resource-prefixes.ts';
import { GPU_OPERAND_LABELS } from '../../../../coordinator/policy/driver-defaults.ts';
import { parseDriverRolloutSpec } from '../../../../coordinator/policy/driver-rollout-spec.ts';
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
      pools: [{ name: 'a', nodeSelector: { matchLabels: { rack: 'a' } } }, { name: 'a', nodeSelector: {} }],
    });
    expect(result.ok ? [] : result.problems.map((p) => p.path)).toEqual([
      'spec.driverName',
      'spec.selector',
      'spec.upgradePolicy.maxUnavailable',
      'spec.upgradePolicy.drain.timeoutSeconds',
      'spec.pools[1].nodeSelector',
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
    expect(p.defaultPool).toEqual({ name: 'default', nodeSelector: null, maxUnavailable: { kind: 'percent', value: 25 }, maxParallelUpgrades: 1, minSecondsBetweenStarts: 0, soakSecondsAfterUpgrade: 0 });
    expect(p.maintenanceWindows).toEqual([]);
    expect(p.waitForCompletion).toEqual({ podSelector: null, timeoutSeconds: 0 });
    // On by default, as the GPU Operator's gpuPodDeletion: a driver is never restarted under a GPU pod.
    expect(p.podDeletion).toEqual({ force: false, timeoutSeconds: 300, deleteEmptyDir: false });
    expect(p.podRestart).toEqual({ timeoutSeconds: 900, failAfterSeconds: 120 });
    expect(p.devicePods).toEqual({ resourcePrefixes: GPU_RESOURCE_PREFIXES, podSelector: null });
    expect(p.drain).toMatchObject({ enable: false, force: false, timeoutSeconds: 300, deleteEmptyDir: false });
    expect(p.drain.podSelector.requirements).toEqual([]);
    expect(p.validation).toEqual({ podSelector: null, timeoutSeconds: 600 });
    const off = parseDriverRolloutSpec({ driverName: 'gpu', selector: { matchLabels: { app: 'd' } }, upgradePolicy: { podDeletion: { enable: false } } });
    expect(off.ok && off.policy.podDeletion).toBeNull();
    expect(p.maxFailedNodes).toBeNull();
    expect(p.priorityLabel).toBeNull();
    expect(p.pools).toEqual([]);
  });

  // Each driver's defaults follow the operator it comes from (driver-defaults.ts): a NIC driver
  // (Network Operator) drains and has no pod-deletion step; a GPU driver (GPU Operator) deletes
  // GPU pods and does not drain; a field the spec sets wins.
  it.each([
    { driverName: 'gpu', upgradePolicy: {}, podDeletion: true, drain: false, operands: GPU_OPERAND_LABELS },
    { driverName: 'nvidia', upgradePolicy: {}, podDeletion: true, drain: false, operands: GPU_OPERAND_LABELS },
    { driverName: 'ofed', upgradePolicy: {}, podDeletion: false, drain: true, operands: [] },
    { driverName: 'ofed', upgradePolicy: { podDeletion: {}, drain: { force: true } }, podDeletion: false, drain: true, operands: [] },
    { driverName: 'mofed', upgradePolicy: {}, podDeletion: false, drain: true, operands: [] },
    { driverName: 'doca', upgradePolicy: {}, podDeletion: false, drain: true, operands: [] },
    { driverName: 'sample', upgradePolicy: {}, podDeletion: true, drain: false, operands: [] },
    { driverName: 'ofed', upgradePolicy: { podDeletion: { enable: true }, drain: { enable: false } }, podDeletion: true, drain: false, operands: [] },
    { driverName: 'gpu', upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true } }, podDeletion: false, drain: true, operands: GPU_OPERAND_LABELS },
  ])('$driverName with upgradePolicy $upgradePolicy: podDeletion $podDeletion, drain $drain', ({ driverName, upgradePolicy, podDeletion, drain, operands }) => {
    const result = parseDriverRolloutSpec({ driverName, selector: { matchLabels: { app: 'd' } }, upgradePolicy });
    if (!result.ok) throw new Error('expected a valid spec');
    expect(result.policy.podDeletion !== null).toBe(podDeletion);
    expect(result.policy.drain.enable).toBe(drain);
    expect(result.policy.clients.operandLabels).toEqual(operands);
    // Left absent in the spec (the CRD has no default for them), so a stored spec says what the user wrote.
    expect(result.policy.spec.upgradePolicy.podDeletion.enable).toBe((upgradePolicy as { podDeletion?: { enable?: boolean } }).podDeletion?.enable);
  });

  // A NIC driver's restart must not delete GPU pods, nor a GPU driver's miss none of its own.
  it.each([
    ['gpu', GPU_RESOURCE_PREFIXES],
    ['nvidia', GPU_RESOURCE_PREFIXES],
    ['ofed', NIC_RESOURCE_PREFIXES],
    ['doca', NIC_RESOURCE_PREFIXES],
    ['mlx5', NIC_RESOURCE_PREFIXES],
    ['sample', [...GPU_RESOURCE_PREFIXES, ...NIC_RESOURCE_PREFIXES]],
  ] as const)('defaults podDeletion.resourcePrefixes by the driver: %s', (driverName, prefixes) => {
    const result = parseDriverRolloutSpec({ driverName, selector: { matchLabels: { app: 'd' } } });
    expect(result.ok && result.policy.devicePods.resourcePrefixes).toEqual(prefixes);
  });

  it('NIC defaults cover the Network Operator’s RDMA and SR-IOV resources and no GPU resource', () => {
    const result = parseDriverRolloutSpec({ driverName: 'ofed', selector: { matchLabels: { app: 'd' } } });
    if (!result.ok) throw new Error('expected a valid spec');
    const uses = (resource: string): boolean => result.policy.devicePods.resourcePrefixes.some((p) => resource.startsWith(p));
    for (const r of ['rdma/rdma_shared_device_a', 'nvidia.com/hostdev', 'nvidia.com/rdma_host_dev', 'openshift.io/sriovlegacy']) expect(uses(r), r).toBe(true);
    for (const r of ['nvidia.com/gpu', 'nvidia.com/mig-1g.10gb', 'cpu']) expect(uses(r), r).toBe(false);
  });

  it('keeps resourcePrefixes the spec sets, whatever the driver', () => {
    const result = parseDriverRolloutSpec({ driverName: 'ofed', selector: { matchLabels: { app: 'd' } }, upgradePolicy: { podDeletion: { resourcePrefixes: ['example.com/nic'] } } });
    expect(result.ok && result.policy.devicePods.resourcePrefixes).toEqual(['example.com/nic']);
  });

  it('gives pools the top-level limits unless they set their own', () => {
    const result = parseDriverRolloutSpec({
      driverName: 'ofed',
      selector: { matchLabels: { app: 'ofed' } },
      upgradePolicy: { maxUnavailable: 2, maxParallelUpgrades: 3, podDeletion: { enable: true } },
      pools: [{ name: 'a', nodeSelector: { matchLabels: { rack: 'a' } } }, { name: 'b', nodeSelector: { matchLabels: { rack: 'b' } }, maxUnavailable: '10%', maxParallelUpgrades: 0 }],
    });
    if (!result.ok) throw new Error('expected a valid spec');
    expect(result.policy.pools.map((p) => [p.name, p.maxUnavailable, p.maxParallelUpgrades])).toEqual([
      ['a', { kind: 'count', value: 2 }, 3],
      ['b', { kind: 'percent', value: 10 }, 0],
    ]);
    expect(result.policy.podDeletion).toEqual({ force: false, timeoutSeconds: 300, deleteEmptyDir: false });
  });
});
