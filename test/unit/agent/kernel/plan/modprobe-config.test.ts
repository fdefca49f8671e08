import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../../shared/errors.ts';
import { parseModprobeConfig, renderBlacklist, renderModprobeOptions } from '../../../../../agent/kernel/plan/modprobe-config.ts';

describe('modprobe.d files', () => {
  it('renders options lines, quoting values with blanks', () => {
    expect(renderModprobeOptions({ nvidia: { NVreg_EnableGpuFirmware: '0', NVreg_RegistryDwords: 'A=1; B=2' }, drsample_core: {} })).toBe(
      '# Written by driver-rollout; rewritten on every driver load.\noptions nvidia NVreg_EnableGpuFirmware=0 NVreg_RegistryDwords="A=1; B=2"\n',
    );
  });

  it('refuses names and values modprobe.d cannot carry, listing every problem', () => {
    const render = (): string => renderModprobeOptions({ 'bad module': { ok: '1' }, nvidia: { 'a b': '1', c: 'x"y' } });
    expect(render).toThrow(ConfigError);
    expect(render).toThrow(/parameters\.bad module: not a module name; parameters\.nvidia\.a b: not a parameter name; parameters\.nvidia\.c: quotes/);
  });

  it('renders and parses a blacklist', () => {
    expect(parseModprobeConfig([renderBlacklist(['nouveau', 'rdma-rxe'])]).blacklist).toEqual(new Set(['nouveau', 'rdma_rxe']));
  });

  it('parses what it renders (options round-trip)', () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/);
    const value = fc.stringMatching(/^[a-zA-Z0-9=;:,. _-]{0,12}$/);
    fc.assert(
      fc.property(fc.dictionary(name, fc.dictionary(name, value, { minKeys: 1 }), { minKeys: 1 }), (parameters) => {
        const parsed = parseModprobeConfig([renderModprobeOptions(parameters)]);
        expect(Object.fromEntries(parsed.options)).toEqual(parameters);
      }),
    );
  });

  it('merges options for one module across files and ignores comments and other directives', () => {
    const parsed = parseModprobeConfig(['options a x=1 # comment\nalias pci:v* a\n', 'options a y="2 3"\ninstall b /bin/true\n']);
    expect(parsed.options.get('a')).toEqual({ x: '1', y: '2 3' });
    expect(parsed.options.has('b')).toBe(false);
  });
});
