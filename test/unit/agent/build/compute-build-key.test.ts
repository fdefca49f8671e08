import { describe, expect, it } from 'vitest';
import { computeBuildKey, type BuildKeyInputs } from '../../../../agent/build/compute-build-key.ts';

const base: BuildKeyInputs = {
  kernelVersion: '6.1.0-56-amd64',
  sourceDigest: 'tree:abc',
  generatedFiles: { 'version.h': '#define V "1"\n' },
  recipe: { kind: 'make', directory: '.', targets: ['modules'], variables: { SYSSRC: '{kernelSource}', SYSOUT: '{kernelOutput}' }, modules: 'kernel-open/*.ko' },
  compilerVersion: 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0',
  dependencySymvers: { mofed: 'a'.repeat(64) },
  signingCertificateSha256: undefined,
};

describe('computeBuildKey', () => {
  it('is stable and ignores the order of object keys', () => {
    const reordered: BuildKeyInputs = { ...base, recipe: { modules: 'kernel-open/*.ko', variables: { SYSOUT: '{kernelOutput}', SYSSRC: '{kernelSource}' }, targets: ['modules'], directory: '.', kind: 'make' } };
    expect(computeBuildKey(reordered)).toBe(computeBuildKey(base));
    expect(computeBuildKey(base)).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each<[string, Partial<BuildKeyInputs>]>([
    ['the kernel', { kernelVersion: '6.1.0-57-amd64' }],
    ['the sources', { sourceDigest: 'tree:abd' }],
    ['a generated file', { generatedFiles: { 'version.h': '#define V "2"\n' } }],
    ['the recipe kind', { recipe: { kind: 'kbuild', variables: { SYSSRC: '{kernelSource}', SYSOUT: '{kernelOutput}' } } }],
    ['a variable', { recipe: { ...base.recipe, variables: { SYSSRC: '{kernelSource}', SYSOUT: '{kernelOutput}', NV_EXCLUDE_BUILD_MODULES: 'nvidia-drm' } } as BuildKeyInputs['recipe'] }],
    ['the compiler', { compilerVersion: 'gcc (Debian 12.2.0-14+deb12u2) 12.2.0' }],
    ["a dependency's Module.symvers", { dependencySymvers: { mofed: 'b'.repeat(64) } }],
    ['signing', { signingCertificateSha256: 'c'.repeat(64) }],
  ])('changes with %s', (_what, change) => {
    expect(computeBuildKey({ ...base, ...change })).not.toBe(computeBuildKey(base));
  });

  it('changes with the order of DKMS packages (later ones build against earlier ones)', () => {
    const a = { directory: 'a', variables: {} };
    const b = { directory: 'b', variables: {} };
    expect(computeBuildKey({ ...base, recipe: { kind: 'dkms', packages: [a, b] } })).not.toBe(computeBuildKey({ ...base, recipe: { kind: 'dkms', packages: [b, a] } }));
  });
});
