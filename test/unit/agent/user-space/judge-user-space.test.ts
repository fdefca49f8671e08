import { describe, expect, it } from 'vitest';
import { describeUserSpaceMismatch, judgeUserSpace, type VersionReading } from '../../../../agent/user-space/plan/judge-user-space.ts';

const module = (name: string, version: string): VersionReading => ({ name, what: `${name}.ko (modinfo)`, version });
const library = (name: string, version: string): VersionReading => ({ name, what: `/usr/lib/x86_64-linux-gnu/nvidia/current/${name} -> ${name.replace(/\.1$/, '')}.${version}`, version });
const smi = (version: string): VersionReading => ({ name: 'nvidia-smi', what: '/usr/lib/nvidia/current/nvidia-smi', version });
const userSpace = (version: string) => [library('libcuda.so.1', version), library('libnvidia-ml.so.1', version), smi(version)];
const modules = (version: string) => [module('nvidia', version), module('nvidia_uvm', version), module('nvidia_modeset', version)];

describe('judgeUserSpace: is the user space of the modules\' release?', () => {
  it('one release throughout: a match', () => {
    expect(judgeUserSpace(modules('535.309.01'), userSpace('535.309.01'))).toEqual({ kind: 'match', version: '535.309.01' });
  });

  it("535.309.01 libraries against 535.261.03 modules: a mismatch naming every file of the other release", () => {
    const verdict = judgeUserSpace(modules('535.261.03'), userSpace('535.309.01'));
    expect(verdict).toEqual({ kind: 'mismatch', moduleVersions: ['535.261.03'], differing: userSpace('535.309.01'), missing: [] });
    if (verdict.kind !== 'mismatch') throw new Error('not a mismatch');
    expect(describeUserSpaceMismatch(verdict)).toBe(
      'modules 535.261.03, user space 535.309.01 (/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1 -> libcuda.so.535.309.01, /usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1 -> libnvidia-ml.so.535.309.01, /usr/lib/nvidia/current/nvidia-smi)',
    );
  });

  it('one stale library among matching ones is a mismatch', () => {
    const stale = library('libnvidia-cfg.so.1', '535.261.03');
    expect(judgeUserSpace(modules('535.309.01'), [...userSpace('535.309.01'), stale])).toMatchObject({ kind: 'mismatch', differing: [stale] });
  });

  it('a loaded 580 driver (a real GPU node) against the image\'s 535 user space: a mismatch', () => {
    expect(judgeUserSpace([module('nvidia', '580.95.05')], userSpace('535.309.01'))).toMatchObject({ kind: 'mismatch', moduleVersions: ['580.95.05'] });
  });

  it('a required part missing is a mismatch, named', () => {
    const verdict = judgeUserSpace(modules('535.309.01'), [library('libnvidia-ml.so.1', '535.309.01')]);
    expect(verdict).toEqual({ kind: 'mismatch', moduleVersions: ['535.309.01'], differing: [], missing: ['libcuda.so.1', 'nvidia-smi'] });
    if (verdict.kind !== 'mismatch') throw new Error('not a mismatch');
    expect(describeUserSpaceMismatch(verdict)).toBe('modules 535.309.01, missing libcuda.so.1, nvidia-smi');
  });

  it('modules that disagree among themselves, or declare no version, never match', () => {
    expect(judgeUserSpace([module('nvidia', '535.309.01'), module('nvidia_uvm', '535.261.03')], userSpace('535.309.01'))).toMatchObject({
      kind: 'mismatch',
      moduleVersions: ['535.261.03', '535.309.01'],
    });
    const verdict = judgeUserSpace([], userSpace('535.309.01'));
    expect(verdict).toMatchObject({ kind: 'mismatch', moduleVersions: [] });
    if (verdict.kind !== 'mismatch') throw new Error('not a mismatch');
    expect(describeUserSpaceMismatch(verdict)).toMatch(/^modules declare no version, user space 535.309.01/);
  });
});
