import { describe, expect, it } from 'vitest';
import type { LoadedModule } from '../../../../../shared/kmod/loaded-module.ts';
import { decideReload, isSameParameterValue } from '../../../../../agent/kernel/plan/decide-reload.ts';
import type { ModuleParameters } from '../../../../../agent/kernel/plan/modprobe-config.ts';
import { aSampleDriver, fakeSrcversion } from '../fixtures.ts';

const built = aSampleDriver('2.0.0').modules;
const both = ['drsample_core', 'drsample_net'];

function live(name: string, version: string, parameters: Record<string, string> = {}): LoadedModule {
  return { name, refcnt: 0, holders: [], srcversion: fakeSrcversion(name, version), version, parameters };
}

function loadedOf(...modules: LoadedModule[]): Map<string, LoadedModule> {
  return new Map(modules.map((m) => [m.name, m]));
}

describe('decideReload', () => {
  it.each<[string, Map<string, LoadedModule>, readonly string[], ModuleParameters, ReturnType<typeof decideReload>]>([
    ['both loaded with the built srcversions', loadedOf(live('drsample_core', '2.0.0'), live('drsample_net', '2.0.0')), both, {}, { kind: 'fast-path' }],
    ['nothing loaded', loadedOf(), both, {}, { kind: 'load', reason: 'drsample_core is not loaded; drsample_net is not loaded' }],
    ['only the modules to load must be loaded', loadedOf(live('drsample_core', '2.0.0')), ['drsample_core'], {}, { kind: 'fast-path' }],
    [
      'an old version loaded',
      loadedOf(live('drsample_core', '1.0.0'), live('drsample_net', '2.0.0')),
      both,
      {},
      { kind: 'load', reason: `drsample_core srcversion ${fakeSrcversion('drsample_core', '1.0.0')} is loaded, ${fakeSrcversion('drsample_core', '2.0.0')} is built` },
    ],
    [
      'a loaded module without srcversion',
      loadedOf({ ...live('drsample_core', '2.0.0'), srcversion: undefined }, live('drsample_net', '2.0.0')),
      both,
      {},
      { kind: 'load', reason: 'drsample_core has no srcversion to compare' },
    ],
    [
      'a changed parameter',
      loadedOf(live('drsample_core', '2.0.0', { greeting: 'hello' }), live('drsample_net', '2.0.0')),
      both,
      { drsample_core: { greeting: 'bonjour' } },
      { kind: 'load', reason: 'drsample_core parameter greeting is hello, configured bonjour' },
    ],
    [
      'a parameter sysfs does not show (mode 0)',
      loadedOf(live('drsample_core', '2.0.0'), live('drsample_net', '2.0.0')),
      both,
      { drsample_core: { secret: '1' } },
      { kind: 'fast-path' },
    ],
  ])('%s', (_name, loaded, toLoad, parameters, expected) => {
    expect(decideReload(built, toLoad, loaded, parameters)).toEqual(expected);
  });

  it.each([
    ['Y', '1', true], ['Y', 'y', true], ['Y', 'on', true], ['Y', '0', false],
    ['N', 'n', true], ['N', 'false', true], ['N', 'Y', false],
    ['hello', 'hello', true], ['1', 'Y', false],
    // kstrtobool reads the first letter: what modprobe passed for a bool shows as Y/N.
    ['Y', 'yes', true], ['Y', 'True', true], ['N', 'no', true], ['N', 'OFF', true], ['Y', 'off', false], ['Y', '', false],
    // Integers show in decimal: hex and octal spellings are the same number.
    ['49', '0x31', true], ['49', '061', true], ['49', '+49', true], ['-1', '-0x1', true], ['49', '0x30', false], ['49', '49abc', false],
    ['0x31', '49', true], ['1,16,3', '1,0x10,3', true], ['1,16', '1,16,3', false],
  ])('sysfs %s and configured %s are the same value: %s', (sysfs, configured, same) => {
    expect(isSameParameterValue(sysfs, configured)).toBe(same);
  });
});
