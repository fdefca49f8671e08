import type { Logger } from '../shared/logger.ts';
import type { BackoffPolicy } from '../shared/backoff.ts';
import type { Clock } from './clock.ts';
import type { NodeApi } from './node-api.ts';
import { retryTransient } from './retry-transient.ts';

/** The value the gate writes; the coordinator treats any non-empty value as "waiting for safe load". */
export const SAFE_LOAD_ANNOTATION_VALUE = 'true';

export interface MarkNodeOptions {
  readonly api: NodeApi;
  readonly nodeName: string;
  readonly annotationKey: string;
  readonly signal: AbortSignal;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly backoff?: BackoffPolicy;
  readonly random?: () => number;
}

/**
 * Merge-patches `<annotationKey>: "true"` onto our own Node, which asks the coordinator to
 * cordon and drain it before the driver loads. A merge patch touches only this key, so it
 * never conflicts with other writers and needs no read first. Transient errors are retried
 * with backoff; denial (403), a missing node (404) and rejected credentials fail at once.
 */
export async function markNodeForSafeLoad(options: MarkNodeOptions): Promise<void> {
  const { api, nodeName, annotationKey, signal } = options;
  await retryTransient(() => api.patchNodeAnnotations(nodeName, { [annotationKey]: SAFE_LOAD_ANNOTATION_VALUE }, signal), {
    ...options,
    what: `annotating node "${nodeName}" with ${annotationKey}`,
  });
  options.logger.info({ node: nodeName, annotation: annotationKey, value: SAFE_LOAD_ANNOTATION_VALUE }, 'node marked: waiting for safe load');
}
