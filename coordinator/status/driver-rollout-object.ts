import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { CanaryStatus, RolloutCondition, RolloutStatus } from '../plan/action.ts';

/** A condition as stored: the planner's condition plus what the status writer adds. */
export interface StoredCondition extends RolloutCondition {
  readonly lastTransitionTime: string;
  readonly observedGeneration: number;
}

/** `.status.canary` as stored: the soak's end as RFC 3339 (the planner has epoch ms). */
export type StoredCanaryStatus = Omit<CanaryStatus, 'soakUntil'> & { readonly soakUntil: string | null };

/** `.status` as stored: the planner's status with stored conditions. */
export type StoredRolloutStatus = Omit<RolloutStatus, 'conditions' | 'canary' | 'alertGate'> & {
  readonly conditions: readonly StoredCondition[];
  readonly canary?: StoredCanaryStatus | null;
  /** null removes a verdict stored before the gate was taken out of the spec (the status is a merge patch). */
  readonly alertGate?: RolloutStatus['alertGate'] | null;
};

/** A DriverRollout as read from the API server; `spec` and `status` are untrusted until parsed. */
export interface DriverRolloutObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
  spec?: unknown;
  status?: unknown;
}
