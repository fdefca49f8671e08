import fc from 'fast-check';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { BackoffPolicy } from '../../../shared/backoff.ts';
import { systemClock } from '../../../init-container/clock.ts';
import { GateAbortedError, NodeAccessError, NodeDeletedError, StopRequested } from '../../../init-container/errors.ts';
import { InMemoryNodeApi } from '../../doubles/in-memory-node-api.ts';
import { waitForSafeLoad, type WaitForSafeLoadOptions } from '../../../init-container/wait-for-safe-load.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { captureLogger } from './capture-logger.ts';

const keys = driverKeys('gpu');
const NODE = 'node-a';
const FAST: BackoffPolicy = { initialMs: 1, maxMs: 5, factor: 2, jitter: 0 };

/** An in-memory cluster whose node already carries the safe-load mark, as after markNodeForSafeLoad. */
function aMarkedCluster(init: { labels?: Record<string, string>; unschedulable?: boolean } = {}): InMemoryNodeApi {
  const api = new InMemoryNodeApi();
  api.addNode(NODE, { ...init, annotations: { [keys.waitForSafeLoad]: 'true', unrelated: 'x' } });
  api.addNode('node-b', { annotations: { [keys.waitForSafeLoad]: 'true' } });
  return api;
}

function startWaiting(api: InMemoryNodeApi, extra: Partial<WaitForSafeLoadOptions> = {}) {
  const { logger, lines } = captureLogger();
  const stop = new AbortController();
  let settled = false;
  const promise = waitForSafeLoad({
    api,
    nodeName: NODE,
    annotationKey: keys.waitForSafeLoad,
    stateLabelKey: keys.upgradeState,
    signal: stop.signal,
    clock: systemClock,
    logger,
    backoff: FAST,
    ...extra,
  }).finally(() => {
    settled = true;
  });
  // Keep an unhandled rejection from failing the run before the test awaits it.
  promise.catch(() => undefined);
  return { promise, stop, lines, isSettled: () => settled };
}

/** Lets the waiter reach its watch (a few event-loop turns). */
async function untilWatching(api: InMemoryNodeApi): Promise<void> {
  for (let i = 0; i < 200 && api.openWatches === 0; i += 1) await sleep(1);
  expect(api.openWatches).toBe(1);
}

describe('waitForSafeLoad (with the in-memory API server)', () => {
  it.each([
    { name: 'removed', value: null },
    { name: 'emptied', value: '' },
  ])('resolves as soon as the annotation is $name, from a watch event', async ({ value }) => {
    const api = aMarkedCluster();
    const w = startWaiting(api);
    await untilWatching(api);
    expect(w.isSettled()).toBe(false);
    api.annotate(NODE, { [keys.waitForSafeLoad]: value });
    const cleared = await w.promise;
    expect(cleared.node.annotations[keys.waitForSafeLoad] ?? '').toBe('');
    expect(api.requests.list).toBe(1);
  });

  it('resolves at once when the annotation is already gone at the first list', async () => {
    const api = aMarkedCluster();
    api.annotate(NODE, { [keys.waitForSafeLoad]: null });
    await expect(startWaiting(api).promise).resolves.toMatchObject({ node: { name: NODE } });
    expect(api.requests.watch).toBe(0);
  });

  it('keeps waiting through changes that do not clear it: other annotations, labels, cordon, another node', async () => {
    const api = aMarkedCluster();
    const w = startWaiting(api);
    await untilWatching(api);
    api.annotate(NODE, { unrelated: null });
    api.label(NODE, { [keys.upgradeState]: 'cordon-required' });
    api.cordon(NODE);
    api.annotate('node-b', { [keys.waitForSafeLoad]: null });
    await sleep(20);
    expect(w.isSettled()).toBe(false);
    api.annotate(NODE, { [keys.waitForSafeLoad]: null });
    await expect(w.promise).resolves.toMatchObject({ node: { unschedulable: true } });
  });

  it('re-watches from the last version after a dropped stream and misses nothing', async () => {
    const api = aMarkedCluster();
    const w = startWaiting(api);
    await untilWatching(api);
    api.dropWatches();
    // Removed before the re-watch is open: the new stream replays it from the resourceVersion.
    api.annotate(NODE, { [keys.waitForSafeLoad]: null });
    await w.promise;
    expect(api.requests.watch).toBe(2);
    expect(api.requests.list).toBe(1);
  });

  it('re-lists after 410 Gone and then sees the removal', async () => {
    const api = aMarkedCluster();
    const w = startWaiting(api);
    await untilWatching(api);
    // Writes to another node move the store past our watcher's version; compaction then drops it.
    api.label('node-b', { noise: '1' });
    api.compact();
    api.dropWatches();
    await untilWatching(api);
    expect(api.requests.list).toBe(2);
    api.annotate(NODE, { [keys.waitForSafeLoad]: null });
    await w.promise;
    expect(w.lines.some((l) => l.msg === 'node watch interrupted; re-watching' && String(l.reason).includes('410'))).toBe(true);
  });

  it('survives an API server that is down for a while (the removal happens while it is down)', async () => {
    const api = aMarkedCluster();
    const w = startWaiting(api);
    await untilWatching(api);
    api.setDown(true);
    await sleep(30);
    api.annotate(NODE, { [keys.waitForSafeLoad]: null });
    expect(w.isSettled()).toBe(false);
    api.setDown(false);
    await w.promise;
    expect(w.lines.filter((l) => l.level === 'warn').length).toBeGreaterThan(1);
  });

  it('fails with NodeDeletedError when the node is deleted while waiting', async () => {
    const api = aMarkedCluster();
    const w = startWaiting(api);
    await untilWatching(api);
    api.deleteNode(NODE);
    await expect(w.promise).rejects.toBeInstanceOf(NodeDeletedError);
  });

  it.each([
    { verb: 'list' as const, problem: 'forbidden' },
    { verb: 'watch' as const, problem: 'forbidden' },
  ])('fails at once, naming node and verb, when $verb is denied', async ({ verb, problem }) => {
    const api = aMarkedCluster();
    api.deny(verb);
    const error: unknown = await startWaiting(api).promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeAccessError);
    expect((error as NodeAccessError).problem).toBe(problem);
    expect((error as Error).message).toMatch(new RegExp(`${verb} nodes "${NODE}"`));
    expect(api.requests[verb]).toBe(1);
  });

  it('fails with not-found when the node does not exist', async () => {
    const api = new InMemoryNodeApi();
    const error: unknown = await startWaiting(api).promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeAccessError);
    expect((error as Error).message).toMatch(/node "node-a" not found/);
  });

  it('stops promptly on abort with a message saying what it waited for and what it saw', async () => {
    const api = aMarkedCluster({ labels: { [keys.upgradeState]: 'drain-required' }, unschedulable: true });
    const w = startWaiting(api);
    await untilWatching(api);
    // Nothing else would end the wait (no timeout, a status interval longer than the test's
    // timeout): settling at all shows the abort ended it.
    w.stop.abort(new StopRequested('signal', 'received SIGTERM'));
    const error: unknown = await w.promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GateAbortedError);
    expect((error as Error).message).toMatch(/received SIGTERM.*nvidia.com\/gpu-driver-upgrade.driver-wait-for-safe-load.*node-a.*cordoned: true, upgrade state: drain-required/);
    expect((error as Error).cause).toBeInstanceOf(StopRequested);
    expect(api.openWatches).toBe(0);
  });

  it('logs what it waits for and what it sees at every status interval', async () => {
    const api = aMarkedCluster({ labels: { [keys.upgradeState]: 'upgrade-required' } });
    const w = startWaiting(api, { statusIntervalMs: 25 });
    await untilWatching(api);
    await sleep(60);
    api.cordon(NODE);
    api.label(NODE, { [keys.upgradeState]: 'drain-required' });
    await sleep(60);
    api.annotate(NODE, { [keys.waitForSafeLoad]: null });
    await w.promise;
    const reports = w.lines.filter((l) => l.msg === 'waiting for safe load');
    expect(reports.length).toBeGreaterThanOrEqual(3);
    expect(reports[0]).toMatchObject({ node: NODE, annotationValue: 'true', cordoned: false, upgradeState: 'upgrade-required', watch: 'open' });
    expect(reports.at(-1)).toMatchObject({ cordoned: true, upgradeState: 'drain-required' });
    expect(String(reports[0]?.waitingFor)).toContain(keys.waitForSafeLoad);
    const count = reports.length;
    await sleep(60);
    expect(w.lines.filter((l) => l.msg === 'waiting for safe load')).toHaveLength(count);
  });

  it('never resolves while the annotation is set, and always resolves after it is removed, whatever the disruptions', async () => {
    type Step = 'drop' | 'compact-drop' | 'outage' | 'noise' | 'cordon' | 'failures';
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom<Step>('drop', 'compact-drop', 'outage', 'noise', 'cordon', 'failures'), { maxLength: 6 }), async (steps) => {
        const api = aMarkedCluster();
        const w = startWaiting(api);
        await untilWatching(api);
        for (const [i, step] of steps.entries()) {
          if (step === 'drop') api.dropWatches();
          if (step === 'compact-drop') {
            api.label('node-b', { noise: String(i) });
            api.compact();
            api.dropWatches();
          }
          if (step === 'outage') {
            api.setDown(true);
            await sleep(3);
            api.setDown(false);
          }
          if (step === 'noise') api.label(NODE, { noise: String(i) });
          if (step === 'cordon') api.cordon(NODE, i % 2 === 0);
          if (step === 'failures') {
            api.failNextRequests(2);
            api.dropWatches();
          }
          await sleep(2);
          expect(w.isSettled()).toBe(false);
        }
        api.annotate(NODE, { [keys.waitForSafeLoad]: null });
        const cleared = await w.promise;
        expect(cleared.node.annotations[keys.waitForSafeLoad]).toBeUndefined();
      }),
      { numRuns: 40 },
    );
  });
});
