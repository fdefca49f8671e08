import { describe, expect, it } from 'vitest';
import { parseBuildRecipe } from '../../../../agent/build/build-recipe.ts';
import { sourceTreeFromMakefile } from '../../../../agent/build/find-kernel-trees.ts';

describe('parseBuildRecipe', () => {
  it('reads the three kinds with their defaults', () => {
    expect(parseBuildRecipe('{"kind":"kbuild","variables":{"A":"x y"}}', 'build-recipe')).toEqual({ ok: true, recipe: { kind: 'kbuild', variables: { A: 'x y' } } });
    expect(parseBuildRecipe('{"kind":"make","variables":{"SYSSRC":"{kernelSource}"},"modules":"kernel-open/*.ko"}', 'build-recipe')).toEqual({
      ok: true,
      recipe: { kind: 'make', directory: '.', targets: ['modules'], variables: { SYSSRC: '{kernelSource}' }, modules: 'kernel-open/*.ko' },
    });
    expect(parseBuildRecipe('{"kind":"dkms","packages":[{"directory":"ofa"},{"directory":"peermem","variables":{"OFA_DIR":"{built:ofa}"}}]}', 'build-recipe')).toEqual({
      ok: true,
      recipe: { kind: 'dkms', packages: [{ directory: 'ofa', variables: {} }, { directory: 'peermem', variables: { OFA_DIR: '{built:ofa}' } }] },
    });
  });

  it.each([
    ['not JSON', '{kind:', 'build-recipe'],
    ['an unknown kind', '{"kind":"cmake"}', 'build-recipe.kind'],
    ['a bad variable name', '{"kind":"kbuild","variables":{"A B":"1"}}', 'build-recipe.variables.A B'],
    ['a non-string value', '{"kind":"kbuild","variables":{"A":1}}', 'build-recipe.variables.A'],
    ['a path outside the source', '{"kind":"dkms","packages":[{"directory":"../x"}]}', 'build-recipe.packages[0].directory'],
    ['no packages', '{"kind":"dkms","packages":[]}', 'build-recipe.packages'],
    ['a package twice', '{"kind":"dkms","packages":[{"directory":"a"},{"directory":"./a"}]}', 'build-recipe.packages[1].directory'],
    ['an unknown field', '{"kind":"make","modules":"*.ko","target":"all"}', 'build-recipe'],
  ])('names the field of %s', (_what, text, path) => {
    const parsed = parseBuildRecipe(text, 'build-recipe');
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problems.map((p) => p.path)).toContain(path);
  });
});

describe('sourceTreeFromMakefile (Debian split headers)', () => {
  it("follows Debian's one-line include to the -common tree, for any kernel", () => {
    expect(sourceTreeFromMakefile('include /usr/src/linux-headers-6.1.0-56-common/Makefile\n', '/usr/src/linux-headers-6.1.0-56-amd64')).toBe('/usr/src/linux-headers-6.1.0-56-common');
    expect(sourceTreeFromMakefile('include /usr/src/linux-headers-6.12.9+bpo-common/Makefile\n', '/x')).toBe('/usr/src/linux-headers-6.12.9+bpo-common');
    expect(sourceTreeFromMakefile('# generated\ninclude ../src/Makefile\n', '/build/out')).toBe('/build/src');
  });

  it("is undefined for a kernel's full top-level Makefile (not split)", () => {
    const full = ['VERSION = 6', 'PATCHLEVEL = 1', 'SUBLEVEL = 0', 'EXTRAVERSION =', 'NAME = Hurr durr', 'include $(srctree)/scripts/Kbuild.include'].join('\n');
    expect(sourceTreeFromMakefile(full, '/usr/src/linux')).toBeUndefined();
  });
});
