import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRestorableAfter, LastGoodRecordError, readLastGoodDriver, writeLastGoodDriver, type LastGoodDriver } from '../../../../agent/kernel/last-good-driver.ts';
import type { LoadedModule } from '../../../../shared/kmod/loaded-module.ts';

const RECORD: LastGoodDriver = {
  driver: 'gpu',
  version: '580.142',
  kernelVersion: '6.1.0-56-amd64',
  modules: [
    { name: 'nvidia', path: '/cache/gpu/nvidia.ko', srcversion: 'ABC123', version: '580.142', dependsOn: [], parameters: ['NVreg_OpenRmEnableUnsupportedGpus'], firmware: ['nvidia/580.142/gsp_ga10x.bin'] },
    { name: 'nvidia_uvm', path: '/cache/gpu/nvidia-uvm.ko', srcversion: undefined, version: undefined, dependsOn: ['nvidia'] },
  ],
  loaded: ['nvidia', 'nvidia_uvm'],
  optionsText: 'options nvidia NVreg_OpenRmEnableUnsupportedGpus=1\n',
};

describe('the last good driver record', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'last-good-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads back what was written, modules without srcversion or version included', async () => {
    const file = join(dir, 'written.json');
    await writeLastGoodDriver(file, RECORD);
    expect(await readLastGoodDriver(file)).toEqual(RECORD);
  });

  it('is undefined when there is no file', async () => {
    expect(await readLastGoodDriver(join(dir, 'none.json'))).toBeUndefined();
  });

  const { loaded: _loaded, ...withoutLoaded } = RECORD;
  it.each([
    { what: 'half-written JSON', text: '{"driver": "gpu", "version": 58', field: '(JSON)' },
    { what: 'a list', text: '[]', field: '(record)' },
    { what: 'a record without loaded', text: JSON.stringify(withoutLoaded), field: 'loaded' },
    { what: 'a module path that is a number', text: JSON.stringify({ ...RECORD, modules: [{ ...RECORD.modules[0], path: 7 }] }), field: 'modules.0.path' },
    { what: 'a version that is a number', text: JSON.stringify({ ...RECORD, version: 580.142 }), field: 'version' },
  ])('$what is an error naming the file and $field, never "no record"', async ({ what, text, field }) => {
    const file = join(dir, `${what.replaceAll(' ', '-')}.json`);
    await writeFile(file, text);
    const error: unknown = await readLastGoodDriver(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LastGoodRecordError);
    expect((error as LastGoodRecordError).fields).toMatchObject({ path: file, field });
    expect((error as LastGoodRecordError).message).toContain(`last good driver record ${file}`);
    expect((error as LastGoodRecordError).cause).toBeDefined();
  });
});

describe('isRestorableAfter: may a failing reload go back to the record?', () => {
  const KVER = RECORD.kernelVersion;
  const NEW = [
    { name: 'nvidia', path: '/cache/gpu-new/nvidia.ko', srcversion: 'NEW123', version: '580.200', dependsOn: [] },
    { name: 'nvidia_uvm', path: '/cache/gpu-new/nvidia-uvm.ko', srcversion: 'NEWUVM', version: '580.200', dependsOn: ['nvidia'] },
  ];
  const loaded = (...modules: (readonly [string, string | undefined])[]): Map<string, LoadedModule> =>
    new Map(modules.map(([name, srcversion]) => [name, { name, refcnt: 0, holders: [], srcversion, version: undefined, parameters: {} }]));

  it.each([
    { what: 'the recorded driver is loaded (the reload unloads it)', before: loaded(['nvidia', 'ABC123'], ['nvidia_uvm', undefined]), kernel: KVER, restorable: true },
    { what: 'nothing of the driver is loaded (an agent killed after the unload, or a reboot)', before: loaded(), kernel: KVER, restorable: true },
    { what: 'part of the new build is loaded (killed between two modprobe calls)', before: loaded(['nvidia', 'NEW123']), kernel: KVER, restorable: true },
    { what: 'a competing inbox module is loaded besides', before: loaded(['nouveau', 'INBOX1']), kernel: KVER, restorable: true },
    { what: 'a module of the driver of another srcversion is loaded (by hand, another agent)', before: loaded(['nvidia', 'HAND99']), kernel: KVER, restorable: false },
    { what: 'the record is for another kernel', before: loaded(), kernel: '6.1.0-99-amd64', restorable: false },
  ])('$what: $restorable', ({ before, kernel, restorable }) => {
    expect(isRestorableAfter(RECORD, kernel, before, NEW)).toBe(restorable);
  });
});
