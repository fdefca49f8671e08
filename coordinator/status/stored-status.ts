import type { RolloutCondition, RolloutStatus } from '../plan/action.ts';
import type { StoredCondition, StoredRolloutStatus } from './driver-rollout-object.ts';

/**
 * The status to store: the planner's status, each condition stamped with observedGeneration
 * and a lastTransitionTime that moves only when the condition's status flips (metav1.Condition
 * semantics), taken from the status stored before.
 */
export function toStoredStatus(previous: unknown, next: RolloutStatus, generation: number, nowIso: string): StoredRolloutStatus {
  const { canary, ...rest } = next;
  const stamped = { ...rest, observedGeneration: generation, conditions: stampConditions(previous, next.conditions, generation, nowIso) };
  // A gate taken out of the spec: its stored verdict is removed (null in the merge patch), once.
  const stale = next.alertGate === undefined && typeof previous === 'object' && previous !== null && (previous as { alertGate?: unknown }).alertGate != null;
  const stored = stale ? { ...stamped, alertGate: null } : stamped;
  // null, not absent, once there is no canary: a merge patch leaves an absent field as it was.
  if (canary === undefined) return stored;
  return { ...stored, canary: canary === null ? null : { ...canary, soakUntil: canary.soakUntil === null ? null : new Date(canary.soakUntil).toISOString() } };
}

export function stampConditions(previous: unknown, conditions: readonly RolloutCondition[], generation: number, nowIso: string): StoredCondition[] {
  const before = previousConditions(previous);
  return conditions.map((c) => {
    const old = before.find((p) => p.type === c.type);
    const lastTransitionTime = old !== undefined && old.status === c.status && typeof old.lastTransitionTime === 'string' ? old.lastTransitionTime : nowIso;
    return { ...c, lastTransitionTime, observedGeneration: generation };
  });
}

/** Conditions whose status is True now and was not before (e.g. to record an Event once). */
export function newlyTrue(previous: unknown, conditions: readonly RolloutCondition[]): RolloutCondition[] {
  const before = previousConditions(previous);
  return conditions.filter((c) => c.status === 'True' && before.find((p) => p.type === c.type)?.status !== 'True');
}

interface LooseCondition {
  readonly type?: unknown;
  readonly status?: unknown;
  readonly lastTransitionTime?: unknown;
}

function previousConditions(previous: unknown): readonly LooseCondition[] {
  if (typeof previous !== 'object' || previous === null) return [];
  const conditions = (previous as { conditions?: unknown }).conditions;
  return Array.isArray(conditions) ? (conditions as LooseCondition[]) : [];
}

/** Structural equality of JSON values, key order ignored: skips writing a status that did not change. */
export function isSameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => isSameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
