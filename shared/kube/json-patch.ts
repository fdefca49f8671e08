/**
 * JSON Patch (RFC 6902) as the API server applies it to an object: operations in order, all or
 * none. A `test` whose value is null passes where the member is absent (its parent object must
 * exist); `add` sets a member whether or not it exists; `remove` of an absent member fails the
 * whole patch. A failed patch is answered 422 (Invalid) with no detail of which operation failed.
 */
export type JsonPatchOperation =
  | { readonly op: 'test'; readonly path: string; readonly value: unknown }
  | { readonly op: 'add'; readonly path: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly path: string };

/** A JSON Pointer (RFC 6901) to the member named by `tokens`, each escaped (`~` as `~0`, `/` as `~1`). */
export function jsonPointer(...tokens: readonly (string | number)[]): string {
  return tokens.map((t) => `/${String(t).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}
