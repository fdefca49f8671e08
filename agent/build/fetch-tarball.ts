import { createHash } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { fetch } from 'undici';
import { abortableSleep, abortReason } from '../../shared/abortable-sleep.ts';
import { backoffDelay } from '../../shared/backoff.ts';
import type { Logger } from '../../shared/logger.ts';
import { SourceChecksumError, SourceFetchError } from './build-errors.ts';

export interface FetchTarballRequest {
  readonly url: string;
  /** Expected sha256 (hex) of the whole file. */
  readonly sha256: string;
  /** Where the verified file is written. Nothing is left there when the fetch fails. */
  readonly destination: string;
  readonly logger: Logger;
  /** Total tries, including the first (default 5). */
  readonly attempts?: number;
  /** First retry delay; doubles per retry up to 30 s, with ±20 % jitter (default 1000 ms). */
  readonly backoffMs?: number;
  readonly signal?: AbortSignal | undefined;
  /** Jitter source, [0, 1) (default Math.random). */
  readonly random?: () => number;
}

const MAX_BACKOFF_MS = 30_000;
/** Progress is logged every 10 % when the size is known, else every 16 MiB. */
const PROGRESS_UNKNOWN_SIZE_BYTES = 16 * 1024 * 1024;

/** Failures worth another try: network errors, truncated bodies, 408, 429 and 5xx. */
class RetryableFetchError extends SourceFetchError {}

/**
 * Downloads a source tarball with retries and verifies its sha256. A checksum mismatch on a
 * complete download is not retried: the artefact is not the one the configuration names.
 */
export async function fetchTarball(request: FetchTarballRequest): Promise<void> {
  const attempts = request.attempts ?? 5;
  const backoffMs = request.backoffMs ?? 1000;
  const expected = request.sha256.toLowerCase();
  for (let attempt = 1; ; attempt++) {
    try {
      const actual = await downloadOnce(request, attempt);
      if (actual !== expected) throw new SourceChecksumError(request.url, expected, actual);
      request.logger.info({ url: request.url, sha256: actual, attempt }, 'driver source tarball downloaded and verified');
      return;
    } catch (error) {
      await rm(request.destination, { force: true });
      if (!(error instanceof RetryableFetchError) || request.signal?.aborted === true) throw error;
      if (attempt >= attempts) {
        throw new SourceFetchError(`downloading ${request.url} failed after ${attempt} attempts: ${error.message}`, { url: request.url, attempts: attempt }, { cause: error });
      }
      const delay = backoffDelay(attempt - 1, { initialMs: backoffMs, maxMs: MAX_BACKOFF_MS, jitter: 0.2 }, request.random ?? Math.random);
      request.logger.warn({ url: request.url, attempt, retryInMs: delay, err: error }, 'driver source download failed; retrying');
      if ((await abortableSleep(delay, request.signal)) === 'aborted' && request.signal !== undefined) throw abortReason(request.signal);
    }
  }
}

async function downloadOnce(request: FetchTarballRequest, attempt: number): Promise<string> {
  const response = await openResponse(request);
  const total = Number.parseInt(response.headers.get('content-length') ?? '', 10);
  const size = Number.isFinite(total) ? total : undefined;
  request.logger.info({ url: request.url, attempt, bytes: size }, 'downloading driver source tarball');
  const hash = createHash('sha256');
  const progress = progressReporter(request, size);
  const file = await open(request.destination, 'w');
  let received = 0;
  try {
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      hash.update(chunk);
      await file.write(chunk);
      received += chunk.length;
      progress(received);
    }
  } catch (error) {
    if (request.signal?.aborted === true) throw error;
    throw new RetryableFetchError(`GET ${request.url}: body interrupted after ${received} bytes: ${(error as Error).message}`, { url: request.url, received }, { cause: error });
  } finally {
    await file.close();
  }
  if (size !== undefined && received !== size) {
    throw new RetryableFetchError(`GET ${request.url}: got ${received} of ${size} bytes`, { url: request.url, received, total: size });
  }
  return hash.digest('hex');
}

async function openResponse(request: FetchTarballRequest): Promise<Awaited<ReturnType<typeof fetch>>> {
  let response: Awaited<ReturnType<typeof fetch>>;
  try {
    response = await fetch(request.url, request.signal === undefined ? {} : { signal: request.signal });
  } catch (error) {
    if (request.signal?.aborted === true) throw error;
    throw new RetryableFetchError(`GET ${request.url}: ${(error as Error).message}`, { url: request.url }, { cause: error });
  }
  if (response.ok && response.body !== null) return response;
  await response.body?.cancel();
  const retryable = response.status === 408 || response.status === 429 || response.status >= 500;
  const message = `GET ${request.url}: HTTP ${response.status}`;
  throw retryable
    ? new RetryableFetchError(message, { url: request.url, status: response.status })
    : new SourceFetchError(message, { url: request.url, status: response.status });
}

/** Logs progress every 10 % of a known size, or every 16 MiB of an unknown one. */
function progressReporter(request: FetchTarballRequest, size: number | undefined): (received: number) => void {
  const step = size === undefined ? PROGRESS_UNKNOWN_SIZE_BYTES : size / 10;
  let next = step;
  return (received) => {
    if (received < next) return;
    const percent = size === undefined ? undefined : Math.floor((received / size) * 100);
    request.logger.info({ url: request.url, received, total: size, percent }, 'driver source download progress');
    next += step;
  };
}
