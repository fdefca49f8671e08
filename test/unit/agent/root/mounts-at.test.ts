import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountsAt } from '../../../../agent/root/mounts-at.ts';

// Lines as the kernel writes /proc/<pid>/mountinfo: a root published, a stale mount stacked on
// it, the node's /proc bound inside, and a path with a space (escaped as \040).
const MOUNTINFO = [
  '22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw',
  '40 22 0:31 / /run rw,nosuid shared:5 - tmpfs tmpfs rw',
  '51 40 0:21 /var/lib/driver-rollout/cache/driver-root/gpu/ab12 /run/nvidia/driver ro,relatime shared:1 - ext4 /dev/vda1 rw',
  '52 51 0:5 / /run/nvidia/driver/proc rw,nosuid shared:12 - proc proc rw',
  '60 51 0:21 /tmp /run/nvidia/driver rw,relatime shared:1 - ext4 /dev/vda1 rw',
  '61 40 0:21 /x /run/my\\040root rw - ext4 /dev/vda1 rw',
  '',
].join('\n');

describe('mountsAt', () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mounts-at-'));
    file = join(dir, 'mountinfo');
    await writeFile(file, MOUNTINFO);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('lists every mount stacked exactly at the path, bottom first, not the ones below it', async () => {
    expect(await mountsAt('/run/nvidia/driver', file)).toEqual([51, 60]);
    expect(await mountsAt('/run/nvidia/driver/', file)).toEqual([51, 60]);
    expect(await mountsAt('/run/nvidia/driver/proc', file)).toEqual([52]);
  });

  it('reads escaped mount points, and finds nothing where nothing is mounted', async () => {
    expect(await mountsAt('/run/my root', file)).toEqual([61]);
    expect(await mountsAt('/run/nvidia', file)).toEqual([]);
  });
});
