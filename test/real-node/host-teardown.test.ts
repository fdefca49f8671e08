import { execFile, spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { containerdConfig, LOOPBACK_CNI, parsePodNetwork } from '../bed/real-node/containerd-config.ts';
import { waitUntil } from '../bed/wait-until.ts';

// host.sh's guard, on its own (the shared bring-up stays up): a runner that dies by SIGKILL
// still has its node's runtime killed, its mounts, cgroups and pod-network bridge removed, its registration
// with the machine-wide sysctl bookkeeping dropped, and its files removed.

const run = promisify(execFile);
const HOST = resolve(import.meta.dirname, '../bed/real-node/host.sh');
const exists = async (p: string): Promise<boolean> => await access(p).then(() => true, () => false);
let work: string | undefined;

afterAll(async () => {
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

describe('test/bed/real-node/host.sh guard', () => {
  it('tears the node down when its owner is killed with SIGKILL', { timeout: 120_000 }, async () => {
    work = await mkdtemp(join(tmpdir(), 'drtest-guard-'));
    const dir = join(work, 'node');
    const id = basename(work);
    await mkdir(join(dir, 'cni', 'net.d'), { recursive: true });
    await writeFile(join(dir, 'containerd.toml'), containerdConfig({ dir, runc: '/usr/sbin/runc', cniBinDir: '/usr/lib/cni', sandboxImage: 'unused' }));
    await writeFile(join(dir, 'cni', 'net.d', '10-loopback.conflist'), LOOPBACK_CNI);
    // The owner: a process standing in for the test runner.
    const owner = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    const ownerPid = owner.pid ?? 0;
    await run('bash', [HOST, 'setup', dir, id]);
    spawn('bash', [HOST, 'guard', String(ownerPid), dir, id], { detached: true, stdio: 'ignore' }).unref();
    const containerd = spawn('containerd', ['--config', join(dir, 'containerd.toml')], { detached: true, stdio: 'ignore' });
    await writeFile(join(dir, 'containerd.pgid'), String(containerd.pid));
    const socket = join(dir, 'containerd', 'containerd.sock');
    await waitUntil('containerd to serve', async () => ((await run('ctr', ['--address', socket, 'version'])).stdout.includes('Server') ? true : undefined), {
      timeoutMs: 60_000, intervalMs: 250,
    });
    const cgroups = async (): Promise<string[]> => (await readdir('/sys/fs/cgroup')).filter((h) => h !== 'unified').map((h) => join('/sys/fs/cgroup', h, `drtest-${id}`));
    expect((await Promise.all((await cgroups()).map(exists))).some(Boolean)).toBe(true);
    expect(await exists(`/run/driver-rollout-real-node/users/${id}`)).toBe(true);
    const { bridge, gateway } = parsePodNetwork(await readFile(join(dir, 'pod-network.env'), 'utf8'));
    const bridgeAddress = async (): Promise<string> => (await run('ip', ['-o', '-4', 'addr', 'show', 'dev', bridge]).catch(() => ({ stdout: '' }))).stdout;
    expect(await bridgeAddress()).toContain(`${gateway}/24`);

    process.kill(ownerPid, 'SIGKILL');
    const containerdGone = new Promise<void>((done) => {
      containerd.on('exit', () => {
        done();
      });
    });
    await containerdGone;
    await waitUntil('the guard to finish', async () => {
      const left = await Promise.all((await cgroups()).map(exists));
      return !left.some(Boolean) && !(await exists(`/run/driver-rollout-real-node/users/${id}`)) && !(await exists(dir)) ? true : undefined;
    }, { timeoutMs: 60_000, intervalMs: 250 });
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(`${dir}/`));
    expect(mounts).toEqual([]);
    expect(await bridgeAddress()).toBe('');
  });
});
