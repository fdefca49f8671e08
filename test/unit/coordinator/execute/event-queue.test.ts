import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ClusterEvent } from '../../../../coordinator/execute/cluster-writer.ts';
import { EventQueue, type EventQueueOptions } from '../../../../coordinator/execute/event-queue.ts';

const anEvent = (name: string, type: ClusterEvent['type'] = 'Normal', at?: Date): ClusterEvent => ({
  target: { kind: 'Node', name, namespace: '' },
  type,
  reason: 'GPUDriverUpgrade',
  message: `Successfully updated node state label to [upgrade-required]`,
  ...(at === undefined ? {} : { at }),
});
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
const RAISED_AT = new Date('2026-11-24T08:00:00Z');

/** Sends that wait until answered by hand; what was dropped, failed and the sizes reported. */
function aHeldQueue(options: Partial<EventQueueOptions> = {}) {
  const sent: { event: ClusterEvent; answer: (error?: Error) => void }[] = [];
  const dropped: { name: string; why: string }[] = [];
  const failed: string[] = [];
  const sizes: number[] = [];
  const queue = new EventQueue(
    (event) =>
      new Promise<void>((resolve, reject) => {
        sent.push({
          event,
          answer: (error) => {
            if (error === undefined) resolve();
            else reject(error);
          },
        });
      }),
    {
      concurrency: 2,
      capacity: 100,
      now: () => RAISED_AT,
      onDropped: (event, why) => dropped.push({ name: event.target.name, why }),
      onFailed: (event) => failed.push(event.target.name),
      onSize: (size) => sizes.push(size),
      ...options,
    },
  );
  const answerNext = async (error?: Error): Promise<void> => {
    const next = sent.find((s) => s.answer !== answered);
    if (next === undefined) throw new Error('nothing under way to answer');
    next.answer(error);
    next.answer = answered;
    await tick();
  };
  return { queue, sent, dropped, failed, sizes, answerNext };
}
const answered = (): void => undefined;

describe('EventQueue: Events go out a few at a time, behind the writes a wave waits for', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends at most `concurrency` Events at once and the next as soon as one is answered, in the order raised', async () => {
    const { queue, sent, answerNext } = aHeldQueue({ concurrency: 2 });
    for (const name of ['n1', 'n2', 'n3', 'n4']) queue.emit(anEvent(name));

    expect(sent.map((s) => s.event.target.name)).toEqual(['n1', 'n2']);
    expect(queue.size).toBe(4);
    await answerNext();
    expect(sent.map((s) => s.event.target.name)).toEqual(['n1', 'n2', 'n3']);
    await answerNext();
    await answerNext();
    await answerNext();
    expect(sent.map((s) => s.event.target.name)).toEqual(['n1', 'n2', 'n3', 'n4']);
    expect(queue.size).toBe(0);
  });

  it('stamps an Event with the time it was raised, not the time it is sent; one that carries its time keeps it', () => {
    const { queue, sent } = aHeldQueue({ concurrency: 2 });
    const earlier = new Date('2026-11-24T07:59:00Z');
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('n2', 'Normal', earlier));

    expect(sent.map((s) => s.event.at)).toEqual([RAISED_AT, earlier]);
  });

  it('sends waiting Warnings before waiting Normal Events', async () => {
    const { queue, sent, answerNext } = aHeldQueue({ concurrency: 1 });
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('n2'));
    queue.emit(anEvent('n3', 'Warning'));

    await answerNext();
    expect(sent.map((s) => s.event.target.name)).toEqual(['n1', 'n3']);
  });

  it('when `capacity` Events wait, drops the oldest waiting Normal one (a Warning only when no Normal one waits) and says so', () => {
    const { queue, sent, dropped } = aHeldQueue({ concurrency: 1, capacity: 2 });
    queue.emit(anEvent('under-way'));
    queue.emit(anEvent('w1', 'Warning'));
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('n2'));
    expect(dropped).toEqual([{ name: 'n1', why: 'full' }]);

    queue.emit(anEvent('w2', 'Warning'));
    expect(dropped).toEqual([{ name: 'n1', why: 'full' }, { name: 'n2', why: 'full' }]);
    queue.emit(anEvent('w3', 'Warning'));
    expect(dropped.at(-1)).toEqual({ name: 'w1', why: 'full' });
    expect(sent.map((s) => s.event.target.name)).toEqual(['under-way']);
    expect(queue.size).toBe(3);
  });

  it('reports an Event the API server refused and goes on with the next', async () => {
    const { queue, sent, failed, answerNext } = aHeldQueue({ concurrency: 1 });
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('n2'));

    await answerNext(new Error('the server is currently unable to handle the request'));
    expect(failed).toEqual(['n1']);
    expect(sent.map((s) => s.event.target.name)).toEqual(['n1', 'n2']);
  });

  it('tells the Events waiting or under way whenever that changes, down to 0', async () => {
    const { queue, sizes, answerNext } = aHeldQueue({ concurrency: 1 });
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('n2'));
    await answerNext();
    await answerNext();

    expect(sizes.at(0)).toBe(1);
    expect(Math.max(...sizes)).toBe(2);
    expect(sizes.at(-1)).toBe(0);
  });

  it('on close, sends what is queued and resolves once it is out, dropping nothing', async () => {
    const { queue, sent, dropped, answerNext } = aHeldQueue({ concurrency: 1 });
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('n2'));
    let closed: number | undefined;
    const closing = queue.close(60_000).then((n) => {
      closed = n;
    });

    await answerNext();
    expect(closed).toBeUndefined();
    await answerNext();
    await closing;
    expect(closed).toBe(0);
    expect(sent).toHaveLength(2);
    expect(dropped).toEqual([]);
  });

  it('on close, drops what still waits when the time is up, and every Event raised after', async () => {
    vi.useFakeTimers();
    const { queue, dropped } = aHeldQueue({ concurrency: 1 });
    queue.emit(anEvent('under-way'));
    queue.emit(anEvent('n1'));
    queue.emit(anEvent('w1', 'Warning'));
    const closing = queue.close(5_000);
    queue.emit(anEvent('late'));

    await vi.advanceTimersByTimeAsync(5_000);
    expect(await closing).toBe(2);
    expect(dropped).toEqual([{ name: 'late', why: 'closed' }, { name: 'w1', why: 'closed' }, { name: 'n1', why: 'closed' }]);
  });

  it('closes at once when nothing is queued', async () => {
    const { queue } = aHeldQueue();
    expect(await queue.close(60_000)).toBe(0);
  });

  it('keeps thousands of waiting Events in order (a revision marking every node)', async () => {
    const { queue, sent, answerNext } = aHeldQueue({ concurrency: 1, capacity: 10_000 });
    const names = Array.from({ length: 3_000 }, (_, i) => `n${i}`);
    for (const name of names) queue.emit(anEvent(name));
    for (let i = 0; i < names.length; i++) await answerNext();

    expect(sent.map((s) => s.event.target.name)).toEqual(names);
    expect(queue.size).toBe(0);
  });
});
