import { describe, expect, it } from 'vitest';
import {
  driverFingerprint,
  driverIdentityFromSettings,
  parseLoadedDriver,
  parseModuleParameters,
  renderLoadedDriver,
  type DriverIdentity,
} from '../../../shared/driver-identity.ts';

const base: DriverIdentity = { version: '570.86.15', modules: ['nvidia', 'nvidia_uvm'], loadPlan: 'nvidia', loadOptional: [], parameters: {} };

describe('driverFingerprint', () => {
  it.each<{ what: string; a: Partial<DriverIdentity>; b: Partial<DriverIdentity> }>([
    { what: 'module order', a: { modules: ['nvidia', 'nvidia_uvm'] }, b: { modules: ['nvidia_uvm', 'nvidia'] } },
    { what: 'dashes and underscores in module names', a: { modules: ['nvidia-uvm', 'nvidia'], loadOptional: ['nvidia-drm'] }, b: { modules: ['nvidia_uvm', 'nvidia'], loadOptional: ['nvidia_drm'] } },
    { what: 'parameter order', a: { parameters: { nvidia: { A: '1', B: '2' }, x: { c: '3' } } }, b: { parameters: { x: { c: '3' }, nvidia: { B: '2', A: '1' } } } },
    { what: 'a module with no parameters', a: { parameters: { nvidia: {} } }, b: { parameters: {} } },
  ])('is the same whatever the $what', ({ a, b }) => {
    expect(driverFingerprint({ ...base, ...a })).toBe(driverFingerprint({ ...base, ...b }));
  });

  it.each<{ what: string; change: Partial<DriverIdentity> }>([
    { what: 'the version', change: { version: '570.86.16' } },
    { what: 'a module', change: { modules: ['nvidia'] } },
    { what: 'the load plan', change: { loadPlan: 'generic' } },
    { what: 'an optional module', change: { loadOptional: ['nvidia_drm'] } },
    { what: 'a parameter value', change: { parameters: { nvidia: { NVreg_EnableGpuFirmware: '0' } } } },
    { what: 'the source tarball', change: { sourceSha256: 'a'.repeat(64) } },
  ])('differs when $what differs', ({ change }) => {
    expect(driverFingerprint({ ...base, ...change })).not.toBe(driverFingerprint(base));
  });

  it('is compact JSON a person can read', () => {
    expect(driverFingerprint({ ...base, parameters: { nvidia: { NVreg_EnableGpuFirmware: '1' } } })).toBe(
      '{"version":"570.86.15","modules":["nvidia","nvidia_uvm"],"loadPlan":"nvidia","loadOptional":[],"parameters":{"nvidia":{"NVreg_EnableGpuFirmware":"1"}}}',
    );
  });
});

describe('driverIdentityFromSettings', () => {
  const from = (settings: Record<string, string>) => driverIdentityFromSettings((s) => settings[s]);

  it('reads the settings as the agent does (load plan default generic, lists split on spaces and commas)', () => {
    expect(from({ version: '1.0.0', modules: 'a, b c', parameters: 'a.x=1 b.y=2,a.z=3' })).toEqual({
      version: '1.0.0',
      modules: ['a', 'b', 'c'],
      loadPlan: 'generic',
      loadOptional: [],
      parameters: { a: { x: '1', z: '3' }, b: { y: '2' } },
    });
  });

  it.each([
    { what: 'no version', settings: { modules: 'a' } },
    { what: 'an empty version', settings: { version: '' } },
    { what: 'a parameter the agent would refuse', settings: { version: '1', parameters: 'nvidia' } },
  ])('is unknown with $what', ({ settings }) => {
    expect(from(settings)).toBeNull();
  });
});

describe('the loaded-driver annotation', () => {
  it('reads back what it wrote, re-canonicalised', () => {
    const fingerprint = driverFingerprint(base);
    const text = renderLoadedDriver({ pod: 'gpu-operator/gpu-driver-x1', fingerprint });
    expect(text).toBe(`{"pod":"gpu-operator/gpu-driver-x1","driver":${fingerprint}}`);
    expect(parseLoadedDriver(text)).toEqual({ pod: 'gpu-operator/gpu-driver-x1', fingerprint, version: '570.86.15' });
    // Written by hand in another key order: the same fingerprint.
    const reordered = '{"driver":{"parameters":{},"loadOptional":[],"loadPlan":"nvidia","modules":["nvidia_uvm","nvidia"],"version":"570.86.15"},"pod":"p"}';
    expect(parseLoadedDriver(reordered)?.fingerprint).toBe(fingerprint);
  });

  it.each([undefined, '', 'not json', '[]', '{"pod":"p"}', '{"pod":1,"driver":{}}', '{"pod":"p","driver":{"version":"1"}}', '{"pod":"p","driver":{"version":"1","modules":[],"loadPlan":"g","loadOptional":[],"parameters":{"m":{"x":1}}}}'])(
    'is not read from %j',
    (text) => {
      expect(parseLoadedDriver(text)).toBeNull();
    },
  );
});

describe('parseModuleParameters', () => {
  it('names the items that are not module.parameter=value', () => {
    expect(parseModuleParameters('nvidia.A=1 bad x.y=')).toEqual({ parameters: { nvidia: { A: '1' }, x: { y: '' } }, bad: ['bad'] });
  });
});
