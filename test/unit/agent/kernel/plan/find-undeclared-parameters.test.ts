import { describe, expect, it } from 'vitest';
import { findUndeclaredParameters } from '../../../../../agent/kernel/plan/find-undeclared-parameters.ts';
import type { ModuleFile } from '../../../../../agent/kernel/kernel-port.ts';
import type { ModuleParameters } from '../../../../../agent/kernel/plan/modprobe-config.ts';

function aModule(name: string, parameters: readonly string[] | undefined): ModuleFile {
  return { name, path: `/cache/${name}.ko`, srcversion: undefined, version: undefined, dependsOn: [], parameters };
}

const built = [aModule('drsample_core', ['greeting']), aModule('drsample_net', [])];

describe('findUndeclaredParameters', () => {
  it.each<[string, ModuleParameters, string[]]>([
    ['declared parameters pass', { drsample_core: { greeting: 'hi' } }, []],
    ['no parameters pass', {}, []],
    ['a misspelt parameter is named with what the module declares', { drsample_core: { greting: 'hi' } }, ['parameters.drsample_core.greting: drsample_core has no parameter greting (it declares greeting); the kernel would ignore it']],
    ['a module without parameters says so', { drsample_net: { speed: '1' } }, ['parameters.drsample_net.speed: drsample_net has no parameter speed (it declares none); the kernel would ignore it']],
    ['the module name may be spelt with a dash', { 'drsample-core': { greting: 'hi' } }, ['parameters.drsample-core.greting: drsample-core has no parameter greting (it declares greeting); the kernel would ignore it']],
    ['parameters the kernel takes for any module pass', { drsample_net: { dyndbg: '+p', async_probe: '1' } }, []],
    ['modules outside the build are not checked', { nouveau: { modeset: '0' } }, []],
  ])('%s', (_name, parameters, expected) => {
    expect(findUndeclaredParameters(built, parameters).map((p) => `${p.path}: ${p.message}`)).toEqual(expected);
  });

  it('does not check a module whose declared parameters are unknown (an older cache entry)', () => {
    expect(findUndeclaredParameters([aModule('drsample_core', undefined)], { drsample_core: { anything: '1' } })).toEqual([]);
  });
});
