import { DriverRolloutError } from '../shared/errors.ts';

/** A call to the API server did not answer in time (client-node sets no request timeout). */
export class RequestTimeoutError extends DriverRolloutError {}

/**
 * `promise`, or a RequestTimeoutError after `ms`. The request itself is not cancelled: it may
 * still land after a later pass. Events and status patches are harmless when late (the next pass
 * writes the status again). Node merge patches carry no resourceVersion, so a late one could undo
 * a later pass's write to the same node: rare (the request hung for `ms` and then succeeded), and
 * the next pass re-plans from what the node then shows.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new RequestTimeoutError(`${what} did not answer within ${ms} ms`, { what, ms }));
    }, ms);
    promise.then(resolve, reject).finally(() => {
      clearTimeout(timer);
    });
  });
}
