import type { Logger } from '../shared/logger.ts';
import { toError } from '../shared/errors.ts';
import { backoffDelay, type BackoffPolicy } from '../shared/backoff.ts';
import { DEFAULT_BACKOFF } from './default-backoff.ts';
import { abortReason } from '../shared/abortable-sleep.ts';
import type { Clock } from './clock.ts';
import { GateAbortedError, NodeAccessError } from './errors.ts';

export interface RetryOptions {
  readonly signal: AbortSignal;
  readonly clock: Clock;
  readonly logger: Logger;
  /** What is being attempted, for the log line ("mark node", "list node"). */
  readonly what: string;
  readonly backoff?: BackoffPolicy;
  readonly random?: () => number;
}

/**
 * Runs `attempt` until it succeeds. Transient failures (network, 5xx, 429, an API server that is
 * restarting) are retried with backoff for as long as `signal` allows; a NodeAccessError
 * (401/403/404/400/422) and an abort are thrown at once.
 */
export async function retryTransient<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  const policy = options.backoff ?? DEFAULT_BACKOFF;
  for (let failures = 0; ; failures += 1) {
    try {
      return await attempt();
    } catch (thrown) {
      if (thrown instanceof NodeAccessError) throw thrown;
      if (options.signal.aborted) throw stoppedWhile(options, failures, thrown);
      const delayMs = backoffDelay(failures, policy, options.random ?? Math.random);
      options.logger.warn({ err: toError(thrown), attempt: failures + 1, retryInMs: delayMs }, `${options.what} failed; retrying`);
      try {
        await options.clock.sleep(delayMs, options.signal);
      } catch {
        throw stoppedWhile(options, failures + 1, thrown);
      }
    }
  }
}

/** SIGTERM or the overall timeout ended the retries: say what was being attempted and the last error. */
function stoppedWhile(options: RetryOptions, failures: number, last: unknown): GateAbortedError {
  const reason = abortReason(options.signal);
  const lastError = failures > 0 ? `; last error: ${toError(last).message}` : '';
  return new GateAbortedError(`stopped (${reason.message}) while ${options.what}${lastError}`, { failures, lastError: toError(last).message }, reason);
}
