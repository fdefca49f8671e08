import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`
 * with `what` and the last error seen. For the test bed's start-up waits only: product code
 * reacts to watches, never to polling.
 */
export async function waitUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`timed out waiting for ${what}${detail}`, { cause: lastError });
    }
    await sleep(options.intervalMs ?? 100);
  }
}
