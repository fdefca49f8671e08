import { describe, expect, it } from 'vitest';
import { parseModinfo } from '../../../../agent/build/read-module-info.ts';

// `modinfo <file.ko>` as kmod 30 prints it for Debian 6.1 modules.
const CORE = `filename:       /cache/drsample_core.ko
version:        1.0.0
description:    driver-rollout sample driver: core
license:        GPL
srcversion:     57F9EB60B32306C3F21DC23
depends:        
retpoline:      Y
name:           drsample_core
vermagic:       6.1.0-56-amd64 SMP preempt mod_unload modversions 
parm:           greeting:Text returned by drsample_core_greeting() (charp)
parm:           debug:(int)
`;

describe('parseModinfo', () => {
  it('reads every declared parameter name, with or without a description', () => {
    expect(parseModinfo(CORE, '/cache/drsample_core.ko')).toEqual({
      name: 'drsample_core',
      srcversion: '57F9EB60B32306C3F21DC23',
      version: '1.0.0',
      dependsOn: [],
      kernelRelease: '6.1.0-56-amd64',
      parameters: ['greeting', 'debug'],
    });
  });

  it('gives an empty parameter list for a module that declares none', () => {
    expect(parseModinfo('name: drsample_net\ndepends: drsample_core\n', 'drsample_net.ko').parameters).toEqual([]);
  });
});
