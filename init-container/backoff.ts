export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;
  /** Fraction of the delay randomised either way (0.2 → ±20 %), so restarted nodes do not retry in lockstep. */
  readonly jitter: number;
}

/** Retries and re-watches: fast first (an API server restart takes seconds), capped at 10 s. */
export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 10_000, factor: 2, jitter: 0.2 };

/** Delay before retry number `attempt` (0-based). `random` returns [0, 1). */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const base = Math.min(policy.maxMs, policy.initialMs * policy.factor ** Math.max(0, attempt));
  const spread = base * policy.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(base + spread));
}
