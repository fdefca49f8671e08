import { release } from 'node:os';
import { describe, expect, it } from 'vitest';
import { systemHostInfo } from '../../../../agent/detect/host-info.ts';

describe('systemHostInfo (the real adapter, on this machine)', () => {
  it('reads the running kernel with uname -r and the distribution from os-release', async () => {
    const host = await systemHostInfo().readHostInfo();
    expect(host.kernelRelease).toBe(release());
    expect(host.distro).toMatch(/^[a-z0-9]+$/);
    expect(host.distro).not.toBe('unknown');
  });
});
