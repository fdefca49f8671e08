/**
 * State transitions as specifications: one table of cases per state (one file per handler in
 * coordinator/plan/states/, mirrored here). Each case: a cluster, a policy, and what the plan must
 * do to node n1: its effects in order (state changes, cordon, pod deletions, evictions, driver
 * restarts), why it waits, and which annotations it writes.
 */
import { describe, expect, it } from 'vitest';
import type { ReasonCode } from '../../../../../coordinator/plan/action.ts';
import type { PdbSnapshot } from '../../../../../coordinator/plan/snapshot.ts';
import type { DriverRolloutSpecInput } from '../../../../../coordinator/policy/driver-rollout-spec.ts';
import { driverKeys } from '../../../../../shared/keys.ts';
import { aCluster, aPod, aPolicy, annotationWrites, effectsOf, planAt, reasonOf, type NodeBuilder, type UpgradePolicyInput } from '../fixtures.ts';

export interface TransitionCase {
  readonly name: string;
  readonly node: NodeBuilder;
  readonly policy?: UpgradePolicyInput;
  readonly others?: readonly NodeBuilder[];
  readonly pdbs?: readonly PdbSnapshot[];
  /** Exactly these effects on n1, in order. */
  readonly effects: readonly string[];
  /** n1's reason after the pass (undefined: n1 is not waiting). */
  readonly reason?: ReasonCode;
  /** n1's reason detail matches. */
  readonly detail?: RegExp;
  /** Annotation writes on n1 (a subset; null = removed). */
  readonly annotations?: Readonly<Record<string, string | null | undefined>>;
  readonly wakeAt?: number | null;
  /** Other spec fields (maxFailedNodes, ...). */
  readonly rest?: Partial<DriverRolloutSpecInput>;
  /** Reasons of other nodes after the pass. */
  readonly otherReasons?: Readonly<Record<string, ReasonCode>>;
}

/** The keys of a second driver on the same nodes. */
export const OFED = driverKeys('ofed');
export const JOBS = { waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 } } as const;
export const DELETION = { podDeletion: {} } as const;
export const NO_DELETION = { podDeletion: { enable: false } } as const;
export const DRAIN = { drain: { enable: true, timeoutSeconds: 300 } } as const;
export const VALIDATION = { validation: { podSelector: 'app=nvidia-operator-validator', timeoutSeconds: 600 } } as const;
export const STOP = { stop: true } as const;
export const gpuPod = (name: string) => aPod(name).requesting('nvidia.com/gpu');
/** A start's cordon, then the steps up to the driver restart, planned behind a check that the node's pods are still those seen (requireSamePods). */
export const CORDON_AND_ON = ['cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required'] as const;
export const DELETE_DRIVER = 'deleteDriverPod:gpu-operator/gpu-driver-n1';

/** One `describe` per table: each case planned once, n1's effects, reason and writes checked. */
export function specifyTransitions(from: string, cases: readonly TransitionCase[]): void {
  describe(`planUpgrades from ${from}`, () => {
    it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
      const cluster = aCluster([c.node, ...(c.others ?? [])], c.pdbs ?? []);
      const plan = planAt(cluster, aPolicy(c.policy ?? {}, c.rest ?? {}));
      expect(effectsOf(plan, 'n1')).toEqual(c.effects);
      const reason = reasonOf(plan, 'n1');
      expect(reason?.code).toBe(c.reason);
      if (c.detail !== undefined) expect(reason?.detail).toMatch(c.detail);
      if (c.annotations !== undefined) {
        const writes = annotationWrites(plan, 'n1');
        for (const [key, value] of Object.entries(c.annotations)) expect(writes[key], key).toBe(value);
      }
      if (c.wakeAt !== undefined) expect(plan.nextWakeAt).toBe(c.wakeAt);
      for (const [other, code] of Object.entries(c.otherReasons ?? {})) expect(reasonOf(plan, other)?.code, other).toBe(code);
    });
  });
}
