import { describe, expect, it } from 'vitest';
import { moduleConfigSha256 } from '../../../../../agent/kernel/module-config-sha256.ts';
import { mergeModuleParameters, parseModuleConfig } from '../../../../../agent/kernel/plan/module-config.ts';

describe('module config files (<module>.conf, the GPU Operator convention)', () => {
  it.each([
    { case: 'items on one line', files: [{ name: 'nvidia.conf', content: 'NVreg_EnableGpuFirmware=0 NVreg_OpenRmEnableUnsupportedGpus=1' }], parameters: { nvidia: { NVreg_EnableGpuFirmware: '0', NVreg_OpenRmEnableUnsupportedGpus: '1' } } },
    { case: 'one item per line with comments', files: [{ name: 'nvidia.conf', content: '# persistence\nNVreg_EnableGpuFirmware=0  # off\n\n' }], parameters: { nvidia: { NVreg_EnableGpuFirmware: '0' } } },
    { case: 'a dash in the file name is the kernel underscore', files: [{ name: 'nvidia-uvm.conf', content: 'uvm_perf_prefetch_enable=0' }], parameters: { nvidia_uvm: { uvm_perf_prefetch_enable: '0' } } },
    { case: 'an empty file sets nothing', files: [{ name: 'nvidia.conf', content: '' }], parameters: {} },
  ])('parses $case', ({ files, parameters }) => {
    expect(parseModuleConfig(files)).toEqual({ parameters, problems: [] });
  });

  it('names every item that is not parameter=value, and a file not named <module>.conf', () => {
    expect(parseModuleConfig([{ name: 'nvidia.conf', content: 'NVreg_A=1 oops =2' }, { name: 'notes.txt', content: 'x=1' }]).problems).toEqual([
      'nvidia.conf: "oops" is not parameter=value',
      'nvidia.conf: "=2" is not parameter=value',
      'notes.txt: not named <module>.conf',
    ]);
  });

  it('checksums the files whatever their order, and any change of a name or a byte changes it', () => {
    const a = { name: 'nvidia.conf', content: 'NVreg_A=1' };
    const b = { name: 'nvidia-uvm.conf', content: 'x=2' };
    expect(moduleConfigSha256([a, b])).toBe(moduleConfigSha256([b, a]));
    expect(moduleConfigSha256([a, b])).not.toBe(moduleConfigSha256([a, { ...b, content: 'x=3' }]));
    expect(moduleConfigSha256([a])).not.toBe(moduleConfigSha256([{ ...a, name: 'nvidia_x.conf' }]));
  });

  it('is the checksum the chart computes: sha256 of "<file>=<base64>;" sorted by file (helm: b64enc, sha256sum)', () => {
    // printf 'nvidia.conf=%s;' "$(printf 'NVreg_EnableGpuFirmware=0' | base64 -w0)" | sha256sum
    expect(moduleConfigSha256([{ name: 'nvidia.conf', content: 'NVreg_EnableGpuFirmware=0' }])).toBe('c72787d270d1a62f2e40c926e7a61d9495b8a731c02d419d339ea4e6bf6a53a5');
  });

  it('lets a file override MODULE_PARAMETERS parameter by parameter', () => {
    expect(mergeModuleParameters({ nvidia: { a: '1', b: '2' }, drm: { x: '1' } }, { nvidia: { b: '3' } })).toEqual({ nvidia: { a: '1', b: '3' }, drm: { x: '1' } });
  });
});

