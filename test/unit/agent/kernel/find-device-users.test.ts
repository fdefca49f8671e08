import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findDeviceUsers, podUidFromCgroup } from '../../../../agent/kernel/find-device-users.ts';
import { holdOpen } from './fixtures.ts';

describe('findDeviceUsers over the real /proc', () => {
  let dir: string;
  let device: string;
  let holder: ChildProcess;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'device-users-'));
    device = join(dir, 'drsample0');
    await writeFile(device, '');
    holder = await holdOpen(device);
  });
  afterAll(async () => {
    holder.kill();
    await rm(dir, { recursive: true, force: true });
  });

  it('names the process holding a device file open', async () => {
    const users = await findDeviceUsers('/proc', [join(dir, 'drsample')]);
    expect(users).toEqual([expect.objectContaining({ pid: holder.pid, command: 'sleep', files: [device] })]);
  });

  it('finds nobody for a prefix no process holds, or no prefix at all', async () => {
    expect(await findDeviceUsers('/proc', [join(dir, 'nothing')])).toEqual([]);
    expect(await findDeviceUsers('/proc', [])).toEqual([]);
  });
});

describe('podUidFromCgroup', () => {
  it.each([
    ['cgroup v2, systemd driver', '0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_0000_4e5f_8a9b_0123456789ab.slice/cri-containerd-abc.scope', '1a2b3c4d-0000-4e5f-8a9b-0123456789ab'],
    ['cgroup v1, cgroupfs driver', '12:devices:/kubepods/besteffort/pod1a2b3c4d-0000-4e5f-8a9b-0123456789ab/0123abcd', '1a2b3c4d-0000-4e5f-8a9b-0123456789ab'],
    ['not in a pod', '0::/system.slice/sshd.service', undefined],
  ])('%s', (_name, cgroup, uid) => {
    expect(podUidFromCgroup(cgroup)).toBe(uid);
  });
});
