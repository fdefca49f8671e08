import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

/**
 * Request options for a JSON merge patch (RFC 7386). client-node 2.x sends a JSON Patch
 * unless the content type is set explicitly, so every patch call passes one of these.
 */
export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Request options for a strategic merge patch (lists merged by key, e.g. pod conditions). */
export const STRATEGIC_MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

/** Request options for a JSON Patch (RFC 6902), as nfd-master writes node labels (the bench's label churn). */
export const JSON_PATCH = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
