import { describe, expect, it } from 'vitest';
import { FLOOR_SAMPLES, floorWaves, SINGLE_SAMPLES } from '../../../../bench/lib/floor-waves.ts';

const fleet = (n: number): string[] => Array.from({ length: n }, (_, i) => `n${String(i)}`);

describe('floorWaves', () => {
  it('samples FLOOR_SAMPLES distinct waves of the allowed size, none on the single-replacement nodes', () => {
    const waves = floorWaves(fleet(200), 20);
    expect(waves).toHaveLength(FLOOR_SAMPLES);
    for (const wave of waves) expect(wave).toHaveLength(20);
    const all = waves.flat();
    expect(new Set(all).size).toBe(all.length);
    expect(all).not.toContain('n0');
    expect(all[0]).toBe(`n${String(SINGLE_SAMPLES)}`);
  });

  it('samples the whole fleet once when the one wave is every node (maxUnavailable 100 %)', () => {
    expect(floorWaves(fleet(100), 100)).toEqual([fleet(100)]);
  });

  it('samples one wave of the allowed size when the fleet has no room for three', () => {
    const waves = floorWaves(fleet(100), 40);
    expect(waves).toEqual([fleet(40)]);
  });

  it('uses the last nodes exactly when three waves just fit', () => {
    const waves = floorWaves(fleet(SINGLE_SAMPLES + 3 * 10), 10);
    expect(waves).toHaveLength(3);
    expect(waves[2]?.at(-1)).toBe(`n${String(SINGLE_SAMPLES + 29)}`);
  });
});
