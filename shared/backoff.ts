/**
 * Exponential backoff with jitter: the one implementation every retry loop uses (the agent's
 * build/load retries and API writers, the source download, the init container's API calls and
 * re-watches, the coordinator's informer restarts).
 */
export interface BackoffPolicy {
  /** Delay before the first retry. */
  readonly initialMs: number;
  /** Cap of the delay before jitter. */
  readonly maxMs: number;
  /** Growth per retry; 2 when left out. */
  readonly factor?: number;
  /**
   * Fraction of the delay randomised so that peers that failed together (an outage) do not retry
   * together: 0.2 → up to 20 %. 0 or left out: no jitter.
   */
  readonly jitter?: number;
  /**
   * `spread` (default): anywhere within ±jitter of the delay. `shorten`: only taken off, so the
   * delay never exceeds the capped value (`maxMs` is then a true maximum).
   */
  readonly jitterMode?: 'spread' | 'shorten';
}

/**
 * Delay in whole milliseconds before retry number `retry` (0 = the first retry, after one
 * failure): `initialMs · factor^retry`, capped at `maxMs`, then jittered. `random` returns
 * [0, 1): the caller's source (Math.random in production, fixed in tests), so this stays pure.
 */
export function backoffDelay(retry: number, policy: BackoffPolicy, random: () => number): number {
  const base = Math.min(policy.maxMs, policy.initialMs * (policy.factor ?? 2) ** Math.max(0, retry));
  const jitter = policy.jitter ?? 0;
  if (jitter === 0) return Math.round(base);
  const offset = policy.jitterMode === 'shorten' ? -base * jitter * random() : base * jitter * (2 * random() - 1);
  return Math.max(0, Math.round(base + offset));
}
