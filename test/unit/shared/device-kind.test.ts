import { describe, expect, it } from 'vitest';
import { deviceKindForDriver } from '../../../shared/device-kind.ts';

describe('deviceKindForDriver', () => {
  it.each([
    ['gpu', 'gpu'],
    ['nvidia', 'gpu'],
    ['ofed', 'nic'],
    ['mofed', 'nic'],
    ['doca', 'nic'],
    ['nic', 'nic'],
    ['mlx5', 'nic'],
    ['sample', undefined],
  ] as const)('%s → %s', (driver, kind) => {
    expect(deviceKindForDriver(driver)).toBe(kind);
  });
});
