import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { superviseDaemon, type DaemonSupervisor } from '../../../../agent/daemons/supervise-daemon.ts';
import type { DaemonSpec } from '../../../../agent/daemons/plan/plan-gpu-daemons.ts';
import { createLogger } from '../../../../shared/logger.ts';
import { waitUntil } from '../../../bed/wait-until.ts';
import { isRunning, writeStandInDaemon } from '../../../fixtures/daemons/stand-in-daemon.ts';

// The supervision of the daemons the agent runs beside a GPU driver, with REAL processes: a
// test-side executable STANDING IN for nvidia-persistenced (test/fixtures/daemons/stand-in-daemon.ts)
// that forks and writes its pid file as the real one does. Every wait is for a state, never for a time.

const log = createLogger('test', 'silent');
let work: string;
let count = 0;
const supervisors: DaemonSupervisor[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'supervise-daemon-'));
});
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop();
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

async function aStandIn(options: { ignoreTerm?: boolean; foreground?: boolean } = {}) {
  const dir = join(work, `daemon-${++count}`);
  return writeStandInDaemon(join(dir, 'usr', 'bin', 'nvidia-persistenced'), join(dir, 'state'), { pidFile: join(dir, 'run', 'nvidia-persistenced', 'nvidia-persistenced.pid'), ...options });
}

// A long stop timeout: it also bounds the wait for the pid file, which a loaded machine can stretch.
function supervise(spec: DaemonSpec, stopTimeoutMs = 60_000): DaemonSupervisor {
  const s = superviseDaemon({ spec, restart: { initialMs: 20, maxMs: 200 }, random: () => 0, pollMs: 20, stopTimeoutMs, log });
  supervisors.push(s);
  return s;
}

const running = (s: DaemonSupervisor) => () => {
  const h = s.health();
  return Promise.resolve(h.state === 'running' ? h : undefined);
};

// Real processes on a shared, loaded machine: the bound only catches a hang.
describe('superviseDaemon, with a stand-in for nvidia-persistenced', { timeout: 120_000 }, () => {
  it('starts a forking daemon and follows the pid it wrote', async () => {
    const standIn = await aStandIn();
    const s = supervise({ name: 'nvidia-persistenced', argv: [standIn.program, '--persistence-mode'], pidFile: standIn.pidFile });
    const health = await waitUntil('the daemon running', running(s));
    expect(health.pid).toBe(await standIn.pid());
    expect(health.restarts).toBe(0);
    expect(await standIn.starts()).toEqual(['--persistence-mode']);
  });

  it('starts it again when it dies, with the count of restarts', async () => {
    const standIn = await aStandIn();
    const s = supervise({ name: 'nvidia-persistenced', argv: [standIn.program], pidFile: standIn.pidFile });
    const first = await waitUntil('the daemon running', running(s));
    process.kill(first.pid, 'SIGKILL');
    const second = await waitUntil('the daemon running again', async () => {
      const h = await running(s)();
      return h !== undefined && h.pid !== first.pid ? h : undefined;
    });
    expect(second.restarts).toBe(1);
    expect(await isRunning(first.pid)).toBe(false);
    expect(await standIn.starts()).toHaveLength(2);
  });

  it('reports a daemon that cannot start as failed, with its own words, and keeps trying until it can', async () => {
    const standIn = await aStandIn();
    await standIn.failStarts('Failed to query NVIDIA devices');
    const s = supervise({ name: 'nvidia-persistenced', argv: [standIn.program], pidFile: standIn.pidFile });
    const failed = await waitUntil('two failed starts', () => {
      const h = s.health();
      return Promise.resolve(h.state === 'failed' && h.restarts >= 2 ? h : undefined);
    });
    expect(failed.lastFailure).toBe('exited with code 1: stand-in: Failed to query NVIDIA devices');
    await standIn.allowStarts();
    const health = await waitUntil('the daemon running once it can start', running(s));
    expect(health.restarts).toBeGreaterThanOrEqual(2);
  });

  it('stops the daemon and does not start it again', async () => {
    const standIn = await aStandIn();
    const s = supervise({ name: 'nvidia-persistenced', argv: [standIn.program], pidFile: standIn.pidFile });
    const { pid } = await waitUntil('the daemon running', running(s));
    await s.stop();
    expect(await isRunning(pid)).toBe(false);
    expect(s.health()).toEqual({ state: 'stopped' });
    expect(await standIn.starts()).toHaveLength(1);
  });

  it('stopped while the daemon is still starting, it leaves no daemon behind', async () => {
    const standIn = await aStandIn();
    const s = supervise({ name: 'nvidia-persistenced', argv: [standIn.program], pidFile: standIn.pidFile });
    await s.stop();
    const pid = await standIn.pid();
    if (pid !== undefined) expect(await isRunning(pid)).toBe(false);
    expect((await standIn.starts()).length).toBeLessThanOrEqual(1);
  });

  it('kills a daemon that ignores SIGTERM once the stop timeout passed', async () => {
    const standIn = await aStandIn({ ignoreTerm: true });
    const s = supervise({ name: 'nvidia-persistenced', argv: [standIn.program], pidFile: standIn.pidFile }, 300);
    const { pid } = await waitUntil('the daemon running', running(s));
    await s.stop();
    expect(await isRunning(pid)).toBe(false);
  });

  it('supervises a daemon that does not fork: the started process itself', async () => {
    const standIn = await aStandIn({ foreground: true });
    const s = supervise({ name: 'nv-fabricmanager', argv: [standIn.program] });
    const first = await waitUntil('the daemon running', running(s));
    expect(first.pid).toBe(await waitUntil('its pid file', standIn.pid));
    process.kill(first.pid, 'SIGKILL');
    const second = await waitUntil('the daemon running again', async () => {
      const h = await running(s)();
      return h !== undefined && h.pid !== first.pid ? h : undefined;
    });
    expect(second.restarts).toBe(1);
    await s.stop();
    expect(await isRunning(second.pid)).toBe(false);
  });
});
