import { describe, expect, it } from 'vitest';
import { parseDriverRootManifest } from '../../../shared/driver-root-manifest.ts';

describe('the driver root manifest', () => {
  it('reads what drivers/stage-driver-root.ts writes', () => {
    const manifest = { flavour: 'nvidia', driverVersion: '535.309.01', packages: ['libcuda1=535.309.01-0+deb12u1'], sha256: 'ab'.repeat(32) };
    expect(parseDriverRootManifest(JSON.stringify(manifest, null, 2))).toEqual(manifest);
  });

  it.each([
    ['{', /^not JSON/],
    ['[]', /^flavour: must be a non-empty string$/],
    ['{"flavour":"x","driverVersion":"","sha256":"a","packages":[]}', /^driverVersion: must be a non-empty string$/],
    ['{"flavour":"x","driverVersion":"1","sha256":"a","packages":[1]}', /^packages: must be a list of strings$/],
  ])('names what is wrong in %s', (text, problem) => {
    expect(parseDriverRootManifest(text)).toMatch(problem);
  });
});
