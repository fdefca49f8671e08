import type { Logger } from '../../shared/logger.ts';
import { toError } from '../../shared/errors.ts';
import { abortableSleep, isAborted } from '../../shared/abortable-sleep.ts';
import { decideLeaseAction, releasedLeaseSpec, type LeaseObservation } from './decide-lease-action.ts';
import { LeaseConflictError, type LeasePort, type LeaseRecord } from './lease-port.ts';

export interface LeaderElectionOptions {
  readonly port: LeasePort;
  readonly identity: string;
  /** How long a standby waits after the last renewal it saw before taking over. */
  readonly leaseDurationSeconds: number;
  /** A leader that could not renew for this long stops leading; must be below the lease duration. */
  readonly renewDeadlineMs: number;
  /** How often the leader renews and a standby retries. */
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  readonly now?: () => number;
  /**
   * Runs while this replica leads. `leading` aborts when leadership is lost or the program
   * stops; the returned promise must settle only once every write has stopped, because the
   * Lease is released (and a standby may start writing) right after.
   */
  readonly lead: (leading: AbortSignal) => Promise<void>;
}

type Attempt = 'held' | 'other-holder' | 'failed';

/**
 * Lease-based leader election, client-go style: only the holder of the Lease writes; the
 * holder renews every retry period and steps down when it could not renew within the renew
 * deadline; a standby takes over once the record has not changed for a lease duration, or at
 * once when the holder released it on a graceful stop. Returns when `signal` aborts.
 */
export async function runLeaderElection(options: LeaderElectionOptions, signal: AbortSignal): Promise<void> {
  const now = options.now ?? Date.now;
  const log = options.logger.child({ lease: options.identity });
  let observation: LeaseObservation = { record: undefined, observedAtMs: now() };
  let current: LeaseRecord | undefined;

  // client-node sets no request timeout: a request hanging on a dead connection must neither keep
  // a leader believing it leads (the watchdog below stops it) nor keep a candidate from retrying.
  const attempt = (): Promise<Attempt> => firstOf(attemptOnce(), options.renewDeadlineMs, 'failed');
  const attemptOnce = async (): Promise<Attempt> => {
    try {
      const record = await options.port.read();
      if (record?.resourceVersion !== observation.record?.resourceVersion) {
        observation = { record, observedAtMs: now() };
      }
      const action = decideLeaseAction(observation, options.identity, options.leaseDurationSeconds, now());
      if (action.kind === 'wait') return 'other-holder';
      current = action.kind === 'create'
        ? await options.port.create(action.spec)
        : await options.port.replace(action.spec, action.expectedResourceVersion);
      observation = { record: current, observedAtMs: now() };
      return 'held';
    } catch (error) {
      if (!(error instanceof LeaseConflictError)) log.warn({ err: toError(error) }, 'lease request failed');
      return 'failed';
    }
  };

  while (!signal.aborted) {
    if ((await attempt()) !== 'held') {
      await abortableSleep(options.retryPeriodMs, signal);
      continue;
    }
    // The program stopped while this attempt was under way (e.g. re-campaigning right after a lost
    // term): an abort listener added now would never fire, so this replica would lead, and its
    // caller's stop wait, for ever. Give the Lease back instead of leading.
    if (isAborted(signal)) {
      await release(options, current, now(), log);
      break;
    }
    log.info({ identity: options.identity }, 'became leader');
    const leading = new AbortController();
    const stop = (): void => { leading.abort(); };
    signal.addEventListener('abort', stop, { once: true });
    const work = options.lead(leading.signal)
      .catch((error: unknown) => { log.error({ err: toError(error) }, 'leader work failed'); })
      .finally(stop);
    const term = { stillHolder: true };
    const lose = (why: string): void => {
      if (leading.signal.aborted) return;
      log.warn({ why }, 'lost leadership');
      term.stillHolder = false;
      stop();
    };
    // Stops leading at the renew deadline even while a renewal request hangs.
    let watchdog = setTimeout(() => { lose('renew deadline passed'); }, options.renewDeadlineMs);
    for (;;) {
      await abortableSleep(options.retryPeriodMs, leading.signal);
      if (leading.signal.aborted) break;
      const result = await firstOf(attempt(), leading.signal, 'failed');
      if (result === 'held') {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => { lose('renew deadline passed'); }, options.renewDeadlineMs);
      } else if (result === 'other-holder') {
        lose('another replica holds the lease');
      }
    }
    clearTimeout(watchdog);
    signal.removeEventListener('abort', stop);
    await work;
    if (term.stillHolder) await release(options, current, now(), log);
    log.info('stopped leading');
  }
}

/** `promise`'s value, or `fallback` once `limit` (ms, or an abort signal) comes first. */
function firstOf<T>(promise: Promise<T>, limit: number | AbortSignal, fallback: T): Promise<T> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const onLimit = (): void => {
      resolve(fallback);
    };
    if (typeof limit === 'number') timer = setTimeout(onLimit, limit);
    else if (limit.aborted) onLimit();
    else limit.addEventListener('abort', onLimit, { once: true });
    promise.then(resolve, () => {
      resolve(fallback);
    }).finally(() => {
      clearTimeout(timer);
      if (typeof limit !== 'number') limit.removeEventListener('abort', onLimit);
    });
  });
}

async function release(options: LeaderElectionOptions, record: LeaseRecord | undefined, nowMs: number, log: Logger): Promise<void> {
  if (record === undefined) return;
  try {
    const released = await firstOf(
      options.port.replace(releasedLeaseSpec(record, nowMs), record.resourceVersion).then(() => true),
      options.renewDeadlineMs,
      false,
    );
    if (!released) log.warn('releasing the lease timed out; a standby takes over when it expires');
  } catch (error) {
    log.warn({ err: toError(error) }, 'could not release the lease; a standby takes over when it expires');
  }
}
