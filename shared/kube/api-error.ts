import { ApiException } from '@kubernetes/client-node';

/** HTTP status of a Kubernetes API error, or undefined for anything else (network, bug). */
export function apiStatusCode(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  return undefined;
}

export function isNotFound(error: unknown): boolean {
  return apiStatusCode(error) === 404;
}

export function isConflict(error: unknown): boolean {
  return apiStatusCode(error) === 409;
}

/** 422: the request was refused as invalid, e.g. a JSON Patch whose `test` failed (shared/kube/json-patch.ts). */
export function isInvalid(error: unknown): boolean {
  return apiStatusCode(error) === 422;
}

/** Eviction refused because a PodDisruptionBudget would be violated. */
export function isTooManyRequests(error: unknown): boolean {
  return apiStatusCode(error) === 429;
}

export function isForbidden(error: unknown): boolean {
  return apiStatusCode(error) === 403;
}

/** The API server's own message for an ApiException (its Status body), else the error's message. */
export function apiErrorMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = error.body;
    if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as { message?: unknown };
        if (typeof parsed.message === 'string') return parsed.message;
      } catch {
        return body;
      }
    }
  }
  return error instanceof Error ? error.message : String(error);
}
