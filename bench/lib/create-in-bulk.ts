import { apiErrorMessage, apiStatusCode } from '../../shared/kube/api-error.ts';
import { DriverRolloutError, toError } from '../../shared/errors.ts';

/** Many API objects made by one benchmark, `concurrency` requests at a time. */
export interface BulkCreation {
  /** What is made, for progress lines and errors ("pods", "nodes"). */
  readonly what: string;
  readonly count: number;
  readonly concurrency: number;
  /** Fail when no object has been made for this long (a hung API server, etcd, or admission). */
  readonly stallMs: number;
  /** Attempts per object for transient failures (429, 5xx, connection errors). */
  readonly attempts?: number;
  /** A progress line every this many objects; 0: none. */
  readonly progressEvery?: number;
  readonly log?: (line: string) => void;
  /** Waits between attempts (tests pass one that does not wait). */
  readonly pause?: (ms: number) => Promise<void>;
}

/** Creation stopped making progress, or an object could not be made at all. */
export class BulkCreationError extends DriverRolloutError {}

export interface BulkCreationResult {
  readonly created: number;
  /** Objects that already existed (a retried request whose first try had succeeded). */
  readonly alreadyExisted: number;
  /** Transient failures retried. */
  readonly retries: number;
  readonly seconds: number;
}

const DEFAULT_ATTEMPTS = 6;

/**
 * Calls `create(i)` for i in 0..count-1, `concurrency` at a time. 409 AlreadyExists counts as made
 * (a timed-out request may have succeeded); 429, 5xx and connection errors are retried with a
 * growing pause; any other answer fails at once, naming the object. When no object has been made
 * for `stallMs`, fails with what got stuck: how many were made, how many requests were in flight,
 * and the last failure seen.
 */
export async function createInBulk(job: BulkCreation, create: (i: number) => Promise<void>): Promise<BulkCreationResult> {
  const attempts = job.attempts ?? DEFAULT_ATTEMPTS;
  const pause = job.pause ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const started = performance.now();
  let next = 0;
  let done = 0;
  let alreadyExisted = 0;
  let retries = 0;
  let inFlight = 0;
  let lastProgress = performance.now();
  let lastFailure: string | undefined;
  let failure: Error | undefined;

  const makeOne = async (i: number): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await create(i);
        return;
      } catch (thrown) {
        const status = apiStatusCode(thrown);
        if (status === 409) {
          alreadyExisted += 1;
          return;
        }
        lastFailure = `${job.what} #${i}: ${status === undefined ? '' : `${status} `}${apiErrorMessage(thrown)}`;
        const transient = status === undefined || status === 429 || status >= 500;
        if (!transient || attempt >= attempts) {
          throw new BulkCreationError(`creating ${job.what} failed at #${i} after ${attempt} attempt(s): ${lastFailure}`, { what: job.what, index: i, status, attempt, made: done }, { cause: thrown });
        }
        retries += 1;
        await pause(Math.min(5_000, 100 * 2 ** attempt));
      }
    }
  };
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < job.count) {
      const i = next++;
      inFlight += 1;
      try {
        await makeOne(i);
      } finally {
        inFlight -= 1;
      }
      done += 1;
      lastProgress = performance.now();
      if (job.progressEvery !== undefined && job.progressEvery > 0 && done % job.progressEvery === 0) {
        job.log?.(`${done}/${job.count} ${job.what} (${Math.round(done / ((performance.now() - started) / 1000))}/s)`);
      }
    }
  };

  let stopWatchdog: () => void = () => undefined;
  const watchdog = new Promise<never>((_, reject) => {
    const timer = setInterval(() => {
      const idleMs = performance.now() - lastProgress;
      if (idleMs < job.stallMs) return;
      clearInterval(timer);
      reject(new BulkCreationError(
        `creating ${job.what} got stuck: ${done}/${job.count} made, none in the last ${Math.round(idleMs / 1000)} s, ${inFlight} request(s) in flight; last failure: ${lastFailure ?? 'none'}`,
        { what: job.what, made: done, count: job.count, inFlight, idleMs: Math.round(idleMs), lastFailure },
      ));
    }, Math.max(10, Math.min(1_000, job.stallMs / 4)));
    stopWatchdog = () => {
      clearInterval(timer);
    };
  });
  const workers = Promise.all(Array.from({ length: Math.max(1, job.concurrency) }, async () => {
    try {
      await worker();
    } catch (thrown) {
      failure ??= toError(thrown);
      throw failure;
    }
  }));
  try {
    await Promise.race([workers, watchdog]);
  } catch (thrown) {
    // Stop handing out work; requests in flight end on their own.
    failure ??= toError(thrown);
    throw thrown;
  } finally {
    stopWatchdog();
  }
  return { created: done - alreadyExisted, alreadyExisted, retries, seconds: (performance.now() - started) / 1000 };
}
