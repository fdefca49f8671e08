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

interface ReloadCase {
  readonly name: string;
  /** What /sys/module shows now. */
  readonly loaded: Map<string, LoadedModule>;
  /** The modules this load asks for. */
  readonly toLoad: readonly string[];
  /** The configured module parameters. */
  readonly parameters: ModuleParameters;
  readonly decision: ReturnType<typeof decideReload>;
}

const RELOAD_CASES: readonly ReloadCase[] = [
  {
    name: 'both loaded with the built srcversions: fast path',
    loaded: loadedOf(live('drsample_core', '2.0.0'), live('drsample_net', '2.0.0')),
    toLoad: both,
    parameters: {},
    decision: { kind: 'fast-path' },
  },
  {
    name: 'nothing loaded: load, naming each module',
    loaded: loadedOf(),
    toLoad: both,
    parameters: {},
    decision: { kind: 'load', reason: 'drsample_core is not loaded; drsample_net is not loaded' },
  },
  {
    name: 'only the modules to load must be loaded',
    loaded: loadedOf(live('drsample_core', '2.0.0')),
    toLoad: ['drsample_core'],
    parameters: {},
    decision: { kind: 'fast-path' },
  },
  {
    name: 'an old version loaded: load, naming both srcversions',
    loaded: loadedOf(live('drsample_core', '1.0.0'), live('drsample_net', '2.0.0')),
    toLoad: both,
    parameters: {},
    decision: { kind: 'load', reason: `drsample_core srcversion ${fakeSrcversion('drsample_core', '1.0.0')} is loaded, ${fakeSrcversion('drsample_core', '2.0.0')} is built` },
  },
  {
    name: 'a loaded module without srcversion: load',
    loaded: loadedOf({ ...live('drsample_core', '2.0.0'), srcversion: undefined }, live('drsample_net', '2.0.0')),
    toLoad: both,
    parameters: {},
    decision: { kind: 'load', reason: 'drsample_core has no srcversion to compare' },
  },
  {
    name: 'a changed parameter: load, naming the value loaded and the one configured',
    loaded: loadedOf(live('drsample_core', '2.0.0', { greeting: 'hello' }), live('drsample_net', '2.0.0')),
    toLoad: both,
    parameters: { drsample_core: { greeting: 'bonjour' } },
    decision: { kind: 'load', reason: 'drsample_core parameter greeting is hello, configured bonjour' },
  },
  {
    name: 'a parameter sysfs does not show (mode 0): fast path',
    loaded: loadedOf(live('drsample_core', '2.0.0'), live('drsample_net', '2.0.0')),
    toLoad: both,
    parameters: { drsample_core: { secret: '1' } },
    decision: { kind: 'fast-path' },
  },
];

interface ParameterCase {
  /** What /sys/module/<m>/parameters/<p> shows. */
  readonly sysfs: string;
  /** What the configuration asks for. */
  readonly configured: string;
  readonly same: boolean;
}

/** A bool shows as Y/N: kstrtobool reads the first letter of what modprobe passed. */
const BOOLS: readonly ParameterCase[] = [
  { sysfs: 'Y', configured: '1', same: true },
  { sysfs: 'Y', configured: 'y', same: true },
  { sysfs: 'Y', configured: 'on', same: true },
  { sysfs: 'Y', configured: 'yes', same: true },
  { sysfs: 'Y', configured: 'True', same: true },
  { sysfs: 'N', configured: 'n', same: true },
  { sysfs: 'N', configured: 'false', same: true },
  { sysfs: 'N', configured: 'no', same: true },
  { sysfs: 'N', configured: 'OFF', same: true },
  { sysfs: 'Y', configured: '0', same: false },
  { sysfs: 'N', configured: 'Y', same: false },
  { sysfs: 'Y', configured: 'off', same: false },
  { sysfs: 'Y', configured: '', same: false },
];

/** An integer shows in decimal: hex, octal and signed spellings of the same number are the same. */
const INTEGERS: readonly ParameterCase[] = [
  { sysfs: '49', configured: '0x31', same: true },
  { sysfs: '49', configured: '061', same: true },
  { sysfs: '49', configured: '+49', same: true },
  { sysfs: '-1', configured: '-0x1', same: true },
  { sysfs: '0x31', configured: '49', same: true },
  { sysfs: '49', configured: '0x30', same: false },
  { sysfs: '49', configured: '49abc', same: false },
  { sysfs: '1', configured: 'Y', same: false },
];

/** Arrays compare element by element; strings as written. */
const ARRAYS_AND_STRINGS: readonly ParameterCase[] = [
  { sysfs: '1,16,3', configured: '1,0x10,3', same: true },
  { sysfs: '1,16', configured: '1,16,3', same: false },
  { sysfs: 'hello', configured: 'hello', same: true },
];

describe('decideReload', () => {
  it.each(RELOAD_CASES)('$name', ({ loaded, toLoad, parameters, decision }) => {
    expect(decideReload(built, toLoad, loaded, parameters)).toEqual(decision);
  });
});

describe('isSameParameterValue', () => {
  it.each([...BOOLS, ...INTEGERS, ...ARRAYS_AND_STRINGS])('sysfs $sysfs and configured $configured are the same value: $same', ({ sysfs, configured, same }) => {
    expect(isSameParameterValue(sysfs, configured)).toBe(same);
  });
});
