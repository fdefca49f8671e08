import { isDeepStrictEqual } from 'node:util';
import type { JsonPatchOperation } from '../../shared/kube/json-patch.ts';

/**
 * Applies a JSON Patch to a copy of `target` as the API server does (shared/kube/json-patch.ts):
 * in order, all or none; a `test` of null passes where the member is absent; `remove` of an
 * absent member fails. Returns the patched copy, or the first operation that failed.
 */
export function applyJsonPatch<T extends object>(target: T, patch: readonly JsonPatchOperation[]): { readonly patched: T } | { readonly failed: JsonPatchOperation } {
  const patched = structuredClone(target);
  for (const op of patch) {
    const tokens = op.path.split('/').slice(1).map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    const key = tokens.pop();
    const parent = tokens.reduce<unknown>((at, token) => (isContainer(at) ? (at as Record<string, unknown>)[token] : undefined), patched);
    if (key === undefined || !isContainer(parent)) return { failed: op };
    const members = parent as Record<string, unknown>;
    if (op.op === 'test') {
      const value = members[key];
      if (op.value === null ? value !== undefined && value !== null : !isDeepStrictEqual(value, op.value)) return { failed: op };
    } else if (op.op === 'add') {
      members[key] = structuredClone(op.value);
    } else {
      if (!(key in members)) return { failed: op };
      Reflect.deleteProperty(members, key);
    }
  }
  return { patched };
}

function isContainer(value: unknown): boolean {
  return typeof value === 'object' && value !== null;
}
