/**
 * Fixture builders for planner tests: `aNode('n1').inState('drain-required').cordoned()`.
 * Every node gets one driver pod of DaemonSet `gpu-driver`; `.outdated()` puts it on the old
 * revision. Times are ms since epoch; NOW is a fixed instant.
 */
import type { UpgradeState } from '../../../../shared/keys.ts';
import { CORDON_HOLDERS_ANNOTATION, driverKeys } from '../../../../shared/keys.ts';
import {
  parseDriverRolloutSpec,
  type DriverRolloutPolicy,
  type DriverRolloutSpecInput,
} from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { parseLabelSelector } from '../../../../coordinator/policy/label-selector.ts';
import type { NodeAction, Plan, ReasonCode } from '../../../../coordinator/plan/action.ts';
import { planUpgrades } from '../../../../coordinator/plan/plan-upgrades.ts';
import type {
  ClusterSnapshot,
  DriverPodSnapshot,
  NodeSnapshot,
  PdbSnapshot,
  PodSnapshot,
} from '../../../../coordinator/plan/snapshot.ts';

export const NOW = Date.UTC(2026, 10, 22, 3, 0, 0);
export const KEYS = driverKeys('gpu');
export const NEW_REVISION = 'rev-new';
export const OLD_REVISION = 'rev-old';
export const DRIVER_DAEMONSET = 'gpu-driver';
export const DRIVER_NAMESPACE = 'gpu-operator';

/** Unix seconds string `secondsAgo` before NOW, as the start-time annotations hold. */
export function secondsAgo(seconds: number): string {
  return String(Math.floor(NOW / 1000) - seconds);
}

let uid = 0;
const nextUid = (): string => `uid-${++uid}`;

export class PodBuilder {
  private pod: { -readonly [K in keyof PodSnapshot]: PodSnapshot[K] };

  constructor(name: string) {
    this.pod = {
      namespace: 'work',
      name,
      uid: nextUid(),
      labels: {},
      phase: 'Running',
      ready: true,
      deleting: false,
      controllerKind: 'ReplicaSet',
      mirror: false,
      usesEmptyDir: false,
      resourceNames: [],
      nodeLabelKeys: [],
    };
  }

  inNamespace(namespace: string): this {
    this.pod.namespace = namespace;
    return this;
  }
  labelled(labels: Record<string, string>): this {
    this.pod.labels = { ...this.pod.labels, ...labels };
    return this;
  }
  /** Requires these node labels (nodeSelector), as a GPU Operator operand requires nvidia.com/gpu.deploy.<operand>. */
  selectingNodes(...keys: string[]): this {
    this.pod.nodeLabelKeys = [...this.pod.nodeLabelKeys, ...keys];
    return this;
  }
  requesting(...resources: string[]): this {
    this.pod.resourceNames = [...this.pod.resourceNames, ...resources];
    return this;
  }
  ownedBy(kind: string | null, name?: string): this {
    this.pod.controllerKind = kind;
    if (name !== undefined) this.pod.controllerName = name;
    return this;
  }
  /** metadata.creationTimestamp `seconds` before NOW (whole seconds, as the API stores it). */
  createdSecondsAgo(seconds: number): this {
    this.pod.createdAt = (Math.floor(NOW / 1000) - seconds) * 1000;
    return this;
  }
  inPhase(phase: PodSnapshot['phase']): this {
    this.pod.phase = phase;
    return this;
  }
  notReady(): this {
    this.pod.ready = false;
    return this;
  }
  terminating(): this {
    this.pod.deleting = true;
    return this;
  }
  mirror(): this {
    this.pod.mirror = true;
    return this;
  }
  withEmptyDir(): this {
    this.pod.usesEmptyDir = true;
    return this;
  }
  evictionRefused(at: number, message = 'Cannot evict pod as it would violate the pod\'s disruption budget.'): this {
    this.pod.evictionBlocked = { at, message };
    return this;
  }
  build(): PodSnapshot {
    return { ...this.pod };
  }
}

export const aPod = (name: string): PodBuilder => new PodBuilder(name);

export class NodeBuilder {
  private node: { -readonly [K in keyof NodeSnapshot]: NodeSnapshot[K] };
  private driver: { -readonly [K in keyof DriverPodSnapshot]: DriverPodSnapshot[K] } | null;

  constructor(name: string) {
    this.node = { name, labels: {}, annotations: {}, unschedulable: false, ready: true, driverPods: [], pods: [] };
    this.driver = {
      namespace: DRIVER_NAMESPACE,
      name: `gpu-driver-${name}`,
      uid: nextUid(),
      daemonSet: DRIVER_DAEMONSET,
      revisionHash: NEW_REVISION,
      phase: 'Running',
      ready: true,
      restartCount: 0,
      deleting: false,
      agentCondition: { status: 'True', reason: 'Loaded', message: 'gpu driver loaded' },
      waiting: null,
    };
  }

  inState(state: UpgradeState): this {
    return this.labelled({ [KEYS.upgradeState]: state });
  }
  labelled(labels: Record<string, string>): this {
    this.node.labels = { ...this.node.labels, ...labels };
    return this;
  }
  annotated(annotations: Record<string, string>): this {
    this.node.annotations = { ...this.node.annotations, ...annotations };
    return this;
  }
  cordoned(): this {
    this.node.unschedulable = true;
    return this;
  }
  /** Cordoned, the cordon held by these drivers (`<keyDomain>/<driverName>`, CORDON_HOLDERS_ANNOTATION). */
  heldBy(...holders: string[]): this {
    return this.cordoned().annotated({ [CORDON_HOLDERS_ANNOTATION]: holders.join(',') });
  }
  /** Cordoned by an admin before the upgrade began (as the start of a cycle records it). */
  cordonedByAdmin(): this {
    return this.cordoned().annotated({ [KEYS.initialStateUnschedulable]: 'true' });
  }
  /** Ready not True; with `secondsAgo`, the node controller's Ready Unknown since then (lastTransitionTime). */
  notReady(secondsAgo?: number): this {
    this.node.ready = false;
    if (secondsAgo !== undefined) {
      this.node.notReady = { status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.', since: NOW - secondsAgo * 1000 };
    }
    return this;
  }
  outdated(): this {
    if (this.driver !== null) this.driver.revisionHash = OLD_REVISION;
    return this;
  }
  driverNotReady(restartCount = 0): this {
    if (this.driver !== null) {
      this.driver.ready = false;
      this.driver.restartCount = restartCount;
      this.driver.agentCondition = { status: 'False', reason: 'Building', message: 'building the gpu driver' };
    }
    return this;
  }
  /** The agent reports a failure (`CompileFailed`, ...) on the driver pod, which is not Ready. */
  driverFailing(reason: string, message: string): this {
    this.driverNotReady();
    if (this.driver !== null) this.driver.agentCondition = { status: 'False', reason, message };
    return this;
  }
  /** A container or init container of the driver pod waits for a kubelet reason (`agent: ImagePullBackOff: ...`); the agent has written nothing. */
  driverWaiting(text: string): this {
    this.driverNotReady();
    if (this.driver !== null) {
      this.driver.waiting = text;
      this.driver.agentCondition = null;
    }
    return this;
  }
  driverTerminating(): this {
    if (this.driver !== null) this.driver.deleting = true;
    return this;
  }
  withoutDriverPod(): this {
    this.driver = null;
    return this;
  }
  waitingForSafeLoad(): this {
    return this.annotated({ [KEYS.waitForSafeLoad]: 'true' });
  }
  with(...pods: (PodBuilder | PodSnapshot)[]): this {
    this.node.pods = [...this.node.pods, ...pods.map((p) => (p instanceof PodBuilder ? p.build() : p))];
    return this;
  }
  build(): NodeSnapshot {
    return { ...this.node, driverPods: this.driver === null ? [] : [{ ...this.driver }] };
  }
}

export const aNode = (name: string): NodeBuilder => new NodeBuilder(name);

export function aPdb(namespace: string, name: string, selector: string, disruptionsAllowed: number): PdbSnapshot {
  const parsed = parseLabelSelector(selector);
  if (!parsed.ok) throw new Error(parsed.message);
  return { namespace, name, selector: parsed.selector, disruptionsAllowed };
}

export function aCluster(nodes: readonly (NodeBuilder | NodeSnapshot)[], pdbs: readonly PdbSnapshot[] = []): ClusterSnapshot {
  return {
    rollout: { namespace: DRIVER_NAMESPACE, name: 'gpu', generation: 3 },
    nodes: nodes.map((n) => (n instanceof NodeBuilder ? n.build() : n)),
    daemonSets: [{ namespace: DRIVER_NAMESPACE, name: DRIVER_DAEMONSET, updatedRevisionHash: NEW_REVISION }],
    pdbs,
  };
}

export type UpgradePolicyInput = NonNullable<DriverRolloutSpecInput['upgradePolicy']>;

/** A valid policy for driver `gpu`; `upgradePolicy` and other spec fields override the defaults. */
/** The DriverRollout spec as a user writes it (the fixture's defaults: no parallel cap, 100% unavailable). */
export function aSpec(upgradePolicy: UpgradePolicyInput = {}, rest: Partial<DriverRolloutSpecInput> = {}): DriverRolloutSpecInput {
  return {
    driverName: 'gpu',
    selector: { matchLabels: { app: 'gpu-driver' } },
    ...rest,
    upgradePolicy: { maxParallelUpgrades: 0, maxUnavailable: '100%', ...upgradePolicy },
  };
}

export function aPolicy(upgradePolicy: UpgradePolicyInput = {}, rest: Partial<DriverRolloutSpecInput> = {}): DriverRolloutPolicy {
  const parsed = parseDriverRolloutSpec(aSpec(upgradePolicy, rest));
  if (!parsed.ok) throw new Error(parsed.problems.map((p) => `${p.path}: ${p.message}`).join('; '));
  return parsed.policy;
}

export function planAt(cluster: ClusterSnapshot, policy: DriverRolloutPolicy, now = NOW): Plan {
  return planUpgrades(cluster, policy, now);
}

export function actionsOf(plan: Plan, node: string): readonly NodeAction[] {
  return plan.nodePlans.find((p) => p.node === node)?.actions ?? [];
}

/** The states a node moved through in this plan, in order. */
export function statesOf(plan: Plan, node: string): UpgradeState[] {
  return actionsOf(plan, node).flatMap((a) => (a.kind === 'setState' ? [a.to] : []));
}

export function reasonOf(plan: Plan, node: string): Plan['reasons'][number] | undefined {
  return plan.reasons.find((r) => r.node === node);
}

/** Action kinds other than bookkeeping (state-start annotations, events), to compare sequences. */
export function effectsOf(plan: Plan, node: string): string[] {
  return actionsOf(plan, node).flatMap((a) => {
    switch (a.kind) {
      case 'setState':
        return [`state:${a.to}`];
      case 'cordon':
      case 'uncordon':
        return [a.kind];
      case 'deletePod':
      case 'evictPod':
      case 'deleteDriverPod':
        return [`${a.kind}:${a.pod.namespace}/${a.pod.name}`];
      case 'clearSafeLoad':
        return ['clearSafeLoad'];
      case 'setLabel':
        return [`label:${a.key}=${a.value}`];
      case 'requireSamePods':
        return ['requireSamePods'];
      case 'setAnnotation':
      case 'removeAnnotation':
      case 'emitEvent':
        return [];
    }
  });
}

export function annotationWrites(plan: Plan, node: string): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const a of actionsOf(plan, node)) {
    if (a.kind === 'setAnnotation') out[a.key] = a.value;
    if (a.kind === 'removeAnnotation' || a.kind === 'clearSafeLoad') out[a.key] = null;
  }
  return out;
}

/**
 * One row of a planner table that varies the newest template's driver (restart-only,
 * signature-refusal): the node, its neighbours, the policy, and what the pass must do and say.
 */
export interface TemplateCase {
  readonly name: string;
  readonly node: NodeBuilder;
  /** The newest template's fingerprint (null: the template does not say plainly); each table says its default. */
  readonly template?: string | null;
  readonly policy?: UpgradePolicyInput;
  readonly others?: readonly NodeBuilder[];
  readonly effects: readonly string[];
  readonly reason?: ReasonCode;
  readonly message?: RegExp;
}
