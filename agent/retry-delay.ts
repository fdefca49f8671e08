/**
 * Delay before attempt `attempt + 1` after `attempt` consecutive failures: doubles from
 * `initialMs` up to `maxMs`, with up to 20 % taken off at random (`random` in [0, 1)) so that
 * agents that failed together (an outage) do not retry together.
 */
export function retryDelay(attempt: number, retry: { readonly initialMs: number; readonly maxMs: number }, random: number): number {
  const base = Math.min(retry.maxMs, retry.initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (1 - 0.2 * random));
}
