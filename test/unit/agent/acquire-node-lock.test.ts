import { mkdir, mkdtemp, rm, stat, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireNodeLock, NodeLockError } from '../../../agent/acquire-node-lock.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'node-lock-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const noEvents = { onWaiting: () => undefined, onCompromised: () => undefined };

describe('acquireNodeLock (real lock directories on disk)', () => {
  it('creates missing parent directories, holds the lock, and frees it on release', async () => {
    const path = join(dir, 'a', 'run', 'agent.lock');
    const release = await acquireNodeLock({ path, signal: new AbortController().signal, ...noEvents });
    expect((await stat(path)).isDirectory()).toBe(true);
    await release();
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a second taker waits (reporting it) until the holder releases', async () => {
    const path = join(dir, 'b.lock');
    const releaseFirst = await acquireNodeLock({ path, signal: new AbortController().signal, ...noEvents });
    let waits = 0;
    const second = acquireNodeLock({ path, signal: new AbortController().signal, ...noEvents, onWaiting: () => { waits++; }, retryMs: 20 });
    await new Promise((r) => setTimeout(r, 100));
    expect(waits).toBeGreaterThan(1);
    await releaseFirst();
    const releaseSecond = await second;
    await releaseSecond();
  });

  it('a lock left by a dead agent (not refreshed for longer than it may be) is taken over at once', async () => {
    const path = join(dir, 'c.lock');
    await mkdir(path);
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(path, longAgo, longAgo);
    const release = await acquireNodeLock({ path, signal: new AbortController().signal, ...noEvents });
    await release();
  });

  it('gives up with NodeLockError when stopped while waiting', async () => {
    const path = join(dir, 'd.lock');
    const release = await acquireNodeLock({ path, signal: new AbortController().signal, ...noEvents });
    const stop = new AbortController();
    const waiting = acquireNodeLock({ path, signal: stop.signal, ...noEvents, retryMs: 20 });
    stop.abort();
    await expect(waiting).rejects.toBeInstanceOf(NodeLockError);
    await release();
  });
});
