import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LastGoodRecordError, readLastGoodDriver, writeLastGoodDriver, type LastGoodDriver } from '../../../../agent/kernel/last-good-driver.ts';

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
