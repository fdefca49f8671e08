import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../init-container/clock.ts';
import { GateAbortedError, NodeAccessError, StopRequested } from '../../../init-container/errors.ts';
import { InMemoryNodeApi } from '../../doubles/in-memory-node-api.ts';
import { markNodeForSafeLoad } from '../../../init-container/mark-node-for-safe-load.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { captureLogger } from './capture-logger.ts';

const key = driverKeys('ofed').waitForSafeLoad;

function mark(api: InMemoryNodeApi, signal = new AbortController().signal) {
  const { logger, lines } = captureLogger();
  const promise = markNodeForSafeLoad({
    api,
    nodeName: 'node-a',
    annotationKey: key,
    signal,
    clock: systemClock,
    logger,
    backoff: { initialMs: 1, maxMs: 4, factor: 2, jitter: 0 },
  });
  return { promise, lines };
}

describe('markNodeForSafeLoad (with the in-memory API server)', () => {
  it('sets the annotation to "true" and leaves every other key alone', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a', { annotations: { other: 'kept' }, labels: { l: 'v' } });
    await mark(api).promise;
    expect(api.node('node-a')).toMatchObject({ annotations: { other: 'kept', [key]: 'true' }, labels: { l: 'v' } });
  });

  it('retries transient API errors with backoff, logging each', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a');
    api.failNextRequests(3);
    const { promise, lines } = mark(api);
    await promise;
    expect(api.requests.patch).toBe(4);
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(api.node('node-a')?.annotations[key]).toBe('true');
  });

  it('retries while the API server is down and succeeds once it is back', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a');
    api.setDown(true);
    const { promise } = mark(api);
    await new Promise((r) => setTimeout(r, 30));
    api.setDown(false);
    await promise;
    expect(api.requests.patch).toBeGreaterThan(2);
  });

  it.each([
    { name: 'denied (403)', setup: (api: InMemoryNodeApi) => { api.addNode('node-a'); api.deny('patch'); }, message: /not allowed to patch nodes "node-a"/ },
    { name: 'missing (404)', setup: () => undefined, message: /node "node-a" not found \(patch nodes\)/ },
  ])('fails at once, naming node and verb, when the node is $name', async ({ setup, message }) => {
    const api = new InMemoryNodeApi();
    setup(api);
    const error: unknown = await mark(api).promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeAccessError);
    expect((error as Error).message).toMatch(message);
    expect(api.requests.patch).toBe(1);
  });

  it('stops retrying when aborted', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a');
    api.setDown(true);
    const stop = new AbortController();
    const { promise } = mark(api, stop.signal);
    setTimeout(() => { stop.abort(new StopRequested('timeout', 'timed out')); }, 20);
    const error: unknown = await promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GateAbortedError);
    expect((error as Error).message).toMatch(/^stopped \(timed out\) while annotating node "node-a" with .*; last error: connect ECONNREFUSED/);
    expect((error as Error).cause).toBeInstanceOf(StopRequested);
  });
});
