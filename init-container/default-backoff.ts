import type { BackoffPolicy } from '../shared/backoff.ts';

/** Retries and re-watches: fast first (an API server restart takes seconds), capped at 10 s, ±20 %. */
export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 10_000, factor: 2, jitter: 0.2 };
