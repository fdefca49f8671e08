import { DriverRolloutError } from '../shared/errors.ts';

/** A call to the API server did not answer in time (client-node sets no request timeout). */
export class RequestTimeoutError extends DriverRolloutError {}

/**
 * `promise`, or a RequestTimeoutError after `ms`. The request itself is not cancelled: every
 * write the coordinator makes is idempotent, so one that lands late is harmless.
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
