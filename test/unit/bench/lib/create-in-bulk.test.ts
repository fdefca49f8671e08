import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { BulkCreationError, createInBulk } from '../../../../bench/lib/create-in-bulk.ts';

const apiError = (code: number, message: string): ApiException<string> => new ApiException(code, message, JSON.stringify({ message }), {});
const noPause = (): Promise<void> => Promise.resolve();
const job = { what: 'pods', concurrency: 4, stallMs: 60_000, pause: noPause };

describe('createInBulk', () => {
  it('makes every object once, never more than `concurrency` at a time', async () => {
    const made: number[] = [];
    let running = 0;
    let most = 0;
    const result = await createInBulk({ ...job, count: 50 }, async (i) => {
      running += 1;
      most = Math.max(most, running);
      await Promise.resolve();
      made.push(i);
      running -= 1;
    });
    expect([...made].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(most).toBeLessThanOrEqual(4);
    expect(result).toMatchObject({ created: 50, alreadyExisted: 0, retries: 0 });
  });

  it('retries 429, 5xx and connection errors, and counts 409 AlreadyExists as made', async () => {
    const tries = new Map<number, number>();
    const result = await createInBulk({ ...job, count: 6 }, (i) => {
      const n = (tries.get(i) ?? 0) + 1;
      tries.set(i, n);
      if (i === 1 && n === 1) return Promise.reject(apiError(429, 'too many requests'));
      if (i === 2 && n <= 2) return Promise.reject(apiError(503, 'etcd leader changed'));
      if (i === 3 && n === 1) return Promise.reject(new Error('socket hang up'));
      if (i === 4 && n === 1) return Promise.reject(apiError(409, 'pods "p-4" already exists'));
      return Promise.resolve();
    });
    expect(result).toMatchObject({ created: 5, alreadyExisted: 1, retries: 4 });
  });

  it('fails at once on a permanent answer, naming the object and the server message', async () => {
    const attempt = createInBulk({ ...job, count: 10, concurrency: 1 }, (i) =>
      i === 3 ? Promise.reject(apiError(403, 'pods "p-3" is forbidden: error looking up service account work/default')) : Promise.resolve());
    await expect(attempt).rejects.toThrow(BulkCreationError);
    await expect(attempt).rejects.toThrow(/creating pods failed at #3 after 1 attempt\(s\): .*403 .*service account work\/default/);
  });

  it('gives up on a transient failure after the last attempt', async () => {
    const attempt = createInBulk({ ...job, count: 1, attempts: 3 }, () => Promise.reject(apiError(500, 'internal error')));
    await expect(attempt).rejects.toThrow(/after 3 attempt\(s\)/);
  });

  it('names what got stuck when no object is made for stallMs', async () => {
    const hung = new Promise<void>(() => undefined);
    const attempt = createInBulk({ ...job, count: 100, concurrency: 2, stallMs: 50 }, async (i) => {
      if (i >= 10) await hung;
    });
    const error = await attempt.then(() => undefined, (thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(BulkCreationError);
    expect((error as BulkCreationError).message).toMatch(/creating pods got stuck: 10\/100 made, none in the last \d+ s, 2 request\(s\) in flight/);
    expect((error as BulkCreationError).fields).toMatchObject({ what: 'pods', made: 10, count: 100, inFlight: 2 });
  });
});
