import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { RolloutCondition, RolloutStatus } from '../plan/action.ts';

/** A condition as stored: the planner's condition plus what the status writer adds. */
export interface StoredCondition extends RolloutCondition {
  readonly lastTransitionTime: string;
  readonly observedGeneration: number;
}

/** `.status` as stored: the planner's status with stored conditions. */
export type StoredRolloutStatus = Omit<RolloutStatus, 'conditions' | 'alertGate'> & {
  readonly conditions: readonly StoredCondition[];
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
