import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { driverKeys, parseUpgradeStateKey, upgradeEventReason } from '../../../shared/keys.ts';

describe('driver keys', () => {
  it('keep the names NVIDIA uses, so existing runbooks keep working', () => {
    const k = driverKeys('gpu');
    expect(k.upgradeState).toBe('nvidia.com/gpu-driver-upgrade-state');
    expect(k.upgradeSkip).toBe('nvidia.com/gpu-driver-upgrade.skip');
    expect(k.drainSkip).toBe('nvidia.com/gpu-driver-upgrade-drain.skip');
    expect(k.waitForSafeLoad).toBe('nvidia.com/gpu-driver-upgrade.driver-wait-for-safe-load');
    expect(k.initialStateUnschedulable).toBe('nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable');
    expect(k.waitForPodCompletionStartTime).toBe('nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time');
    expect(k.validationStartTime).toBe('nvidia.com/gpu-driver-upgrade-validation-start-time');
    expect(k.upgradeRequested).toBe('nvidia.com/gpu-driver-upgrade-requested');
    expect(upgradeEventReason('gpu')).toBe('GPUDriverUpgrade');
  });

  // NFD, GFD and the GPU Operator write (and remove) nvidia.com/gpu.present and nvidia.com/gpu.count.
  it.each(['nvidia.com', 'example.com'])("put the agent's own node facts under driver-rollout.io whatever the domain (%s)", (domain) => {
    const k = driverKeys('gpu', domain);
    expect([k.devicePresent, k.deviceCount, k.driverVersion, k.driverReady]).toEqual([
      'driver-rollout.io/gpu.present',
      'driver-rollout.io/gpu.count',
      'driver-rollout.io/gpu-driver.version',
      'driver-rollout.io/gpu-driver.ready',
    ]);
  });

  it.each([
    ['nvidia.com/ofed-driver-upgrade-state', { domain: 'nvidia.com', driver: 'ofed' }],
    ['example.com/gpu-driver-upgrade-state', { domain: 'example.com', driver: 'gpu' }],
    ['nvidia.com/gpu-driver-upgrade.skip', undefined],
    ['gpu-driver-upgrade-state', undefined],
    ['nvidia.com/-driver-upgrade-state', undefined],
  ])('parseUpgradeStateKey(%s)', (key, expected) => {
    expect(parseUpgradeStateKey(key)).toEqual(expected);
  });

  it('parseUpgradeStateKey inverts driverKeys(...).upgradeState', () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
    fc.assert(fc.property(label, label, (driver, domainPart) => {
      const domain = `${domainPart}.io`;
      expect(parseUpgradeStateKey(driverKeys(driver, domain).upgradeState)).toEqual({ domain, driver });
    }));
  });
});
