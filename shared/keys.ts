/**
 * Every label and annotation key the programs read or write, in one place.
 *
 * Keys keep NVIDIA's names (k8s-operator-libs `pkg/upgrade`, GPU and Network Operator) so that
 * existing runbooks and `kubectl` one-liners keep working. `%s` there is the driver name
 * (`gpu`, `ofed`, ...); here it is `driver`, and the domain (`nvidia.com` by default) is
 * configurable per DriverRollout.
 */
export const DEFAULT_KEY_DOMAIN = 'nvidia.com';

/**
 * Prefix of the keys for facts of our own that NVIDIA's tools never write or read. The agent's
 * node facts (device present/count, driver version/ready) live here, never under NVIDIA's
 * domain: NFD, GPU Feature Discovery and the GPU Operator write and remove
 * `nvidia.com/gpu.present` and `nvidia.com/gpu.count`, and two writers of one label fight. Fixed,
 * not per DriverRollout: the admission policy (manifests/safe-load-policy.yaml) lets the driver
 * pods change labels of this domain only, except the `-driver-upgrade` ones.
 */
export const OWN_KEY_DOMAIN = 'driver-rollout.io';

/** Value of a GPU Operator operand label (`nvidia.com/gpu.deploy.<operand>`) while the driver is replaced, as k8s-driver-manager writes it. */
export const OPERAND_PAUSED_VALUE = 'paused-for-driver-upgrade';

/** Upgrade states, as written in the state label. `unknown` is also the absence of the label. */
export const UPGRADE_STATES = [
  'unknown',
  'upgrade-required',
  'cordon-required',
  'wait-for-jobs-required',
  'pod-deletion-required',
  'drain-required',
  'pod-restart-required',
  'validation-required',
  'uncordon-required',
  'upgrade-done',
  'upgrade-failed',
] as const;
export type UpgradeState = (typeof UPGRADE_STATES)[number];

export function isUpgradeState(value: string): value is UpgradeState {
  return (UPGRADE_STATES as readonly string[]).includes(value);
}

/** Labels Kubernetes itself sets that we read. */
export const CONTROLLER_REVISION_HASH_LABEL = 'controller-revision-hash';
export const POD_TEMPLATE_GENERATION_LABEL = 'pod-template-generation';

export interface DriverKeys {
  readonly domain: string;
  readonly driver: string;
  /** Node label: the node's current upgrade state (one of UPGRADE_STATES). */
  readonly upgradeState: string;
  /** Node label: `"true"` leaves this node alone. */
  readonly upgradeSkip: string;
  /** Pod label: `"true"` means the pod is never drained. */
  readonly drainSkip: string;
  /** Node annotation: set by the init container; the coordinator clears it once the node is safe. */
  readonly waitForSafeLoad: string;
  /** Node annotation: the node was already cordoned before we touched it; never uncordon it. */
  readonly initialStateUnschedulable: string;
  /** Node annotation: unix seconds when the wait for job pods began. */
  readonly waitForPodCompletionStartTime: string;
  /** Node annotation: unix seconds when validation began. */
  readonly validationStartTime: string;
  /** Node annotation: `"true"` forces the node into upgrade-required. */
  readonly upgradeRequested: string;
  /** Node annotation (ours): why the node is not moving, as human text. */
  readonly upgradeReason: string;
  /** Node annotation (ours): unix seconds when the node entered its current state. */
  readonly stateStartTime: string;
  /** Node annotation (ours): unix seconds when the node's current upgrade began (for the duration histogram). */
  readonly upgradeStartTime: string;
  /** Node annotation (ours): unix seconds when the drain began (drain timeout survives restarts). */
  readonly drainStartTime: string;
  /** Node annotation (ours): unix seconds when device-pod deletion began. */
  readonly podDeletionStartTime: string;
  /** Node label (agent, OWN_KEY_DOMAIN): `"true"` when the node has a device this driver serves. */
  readonly devicePresent: string;
  /** Node label (agent, OWN_KEY_DOMAIN): number of devices this driver serves. */
  readonly deviceCount: string;
  /** Node label (agent, OWN_KEY_DOMAIN): version of the driver loaded now. */
  readonly driverVersion: string;
  /** Node label (agent, OWN_KEY_DOMAIN): `"true"` once the driver is loaded and verified. */
  readonly driverReady: string;
  /**
   * Node label (agent, OWN_KEY_DOMAIN): `ready` when the driver built (and is cached) for every
   * other kernel with installed headers (a pending OS update), `failed` when it does not build
   * for one of them; absent when there is no such kernel. The next-kernel preflight.
   */
  readonly nextKernel: string;
  /**
   * Node label (agent, OWN_KEY_DOMAIN): the newest kernel release the driver fails to build for
   * (made a valid label value); absent when none fails. Every failing kernel has its own Event and metric.
   */
  readonly nextKernelFailed: string;
  /**
   * Node annotation (agent, OWN_KEY_DOMAIN): whether the running kernel would accept the modules
   * of the driver the agent is to load under its signature policy (module.sig_enforce, lockdown,
   * Secure Boot), for that driver's identity: shared/module-signature-verdict.ts. Written before
   * anything is unloaded; the coordinator does not start a node whose verdict about the newest
   * template's driver says the kernel would refuse it (plan/start-checks.ts).
   */
  readonly moduleSignatures: string;
  /**
   * Node annotation (agent, OWN_KEY_DOMAIN): the node's own module-signature facts, about no
   * driver build: the running kernel, what makes it enforce signatures, the keys it trusts
   * (shared/kernel-signature-policy.ts). Written by the agent of any driver version at its start,
   * before it builds or loads; the coordinator compares them with the signer the newest template
   * declares (MODULE_SIGNER_ANNOTATION) before it cordons the node (plan/signature-refusal.ts).
   */
  readonly kernelSignaturePolicy: string;
  /** Pod condition type (agent): the readiness gate the driver pod declares. */
  readonly driverReadyCondition: string;
  /** Node annotation (ours): unix seconds when pod-restart-required began (podRestart.timeoutSeconds survives restarts). */
  readonly podRestartStartTime: string;
  /** Node annotation (ours): unix seconds when the current driver pod first showed a failure reason (podRestart.failAfterSeconds). */
  readonly driverFailingSince: string;
  /** Node annotation (ours): the driver DaemonSet revision the node failed at; a newer revision retries the node. */
  readonly failedRevision: string;
  /** Node annotation (ours): JSON of the operand labels we paused and their previous values, restored once the driver is Ready. */
  readonly pausedOperands: string;
  /** Node annotation (ours): unix seconds when the wait for paused operands and device clients to leave began. */
  readonly operandPauseStartTime: string;
  /**
   * Node annotation (ours): comma-separated DaemonSets (`<namespace>/<name>`) whose client pod came
   * back during this pod-restart step; each got one Warning Event (device-clients.ts).
   */
  readonly clientsRecreated: string;
  /**
   * Node annotation (ours): comma-separated device client pods (`<namespace>/<name>`) the
   * pod-restart step deleted on its first pass; they are waited for, any other client pod created
   * from the step's first second on is a replacement (device-clients.ts).
   */
  readonly clientsStopped: string;
  /**
   * Node annotation (agent, OWN_KEY_DOMAIN): the driver loaded now and the pod that loaded it,
   * `{"pod":"<ns>/<name>","driver":<fingerprint>}` (shared/driver-identity.ts); set once the load
   * is verified (fast path included), removed when the agent unloads, fails or finds no device.
   */
  readonly driverLoaded: string;
  /** Node annotation (ours): `"true"` while the node's upgrade is a restart only (the template loads the driver already loaded). */
  readonly restartOnly: string;
  /**
   * Node annotation (ours): unix seconds when the node last started an upgrade, kept after it is
   * done; written while its pool paces starts (minSecondsBetweenStarts), read for the pool's last start.
   */
  readonly lastStartTime: string;
  /**
   * Node annotation (ours): unix seconds when the node last reached upgrade-done from an upgrade;
   * written while its pool soaks upgrades (soakSecondsAfterUpgrade), read for the soak.
   */
  readonly upgradeDoneTime: string;
  /**
   * Node annotation (ours): the rollout revision (`<daemonset>=<hash>`, sorted, comma-separated)
   * this node is a canary of; written when the revision first appears (plan/canary-gate.ts), so a
   * restarted coordinator keeps the same canary set.
   */
  readonly canary: string;
  /** Node annotation (ours): why this canary node failed the canary of the revision in `canary` (it halts the rollout). */
  readonly canaryFailed: string;
  /**
   * Node annotation (ours): unix seconds when the node, NotReady mid-upgrade, was first held in a
   * pool with too many nodes NotReady at once (plan/pool-disruption.ts): its NotReady time fails
   * nothing while this is set. Removed once the pool is healthy again.
   */
  readonly notReadyFrozen: string;
  /**
   * Node annotation (ours): unix seconds from which the node's NotReady time counts toward its
   * failure, set when its pool is healthy again after a freeze (NotReady before that, during the
   * pool's disruption, fails nothing).
   */
  readonly notReadyCountedFrom: string;
  /**
   * Node annotation (ours): the driver (its driverName) whose maintenance stopped this one on the
   * node, since this one loads after it (coordinator/plan/load-order.ts); this driver's own
   * upgrade then starts past the gates that hold new starts (RESUME_CHECKS), and its start removes the mark.
   */
  readonly stoppedFor: string;
}

/** Values of the agent's `<driver>-driver.next-kernel` label. */
export const NEXT_KERNEL_READY = 'ready';
export const NEXT_KERNEL_FAILED = 'failed';

const UPGRADE_STATE_SUFFIX = '-driver-upgrade-state';

export function driverKeys(driver: string, domain: string = DEFAULT_KEY_DOMAIN): DriverKeys {
  const p = `${domain}/${driver}`;
  const fact = `${OWN_KEY_DOMAIN}/${driver}`;
  return {
    domain,
    driver,
    upgradeState: `${p}${UPGRADE_STATE_SUFFIX}`,
    upgradeSkip: `${p}-driver-upgrade.skip`,
    drainSkip: `${p}-driver-upgrade-drain.skip`,
    waitForSafeLoad: `${p}-driver-upgrade.driver-wait-for-safe-load`,
    initialStateUnschedulable: `${p}-driver-upgrade.node-initial-state.unschedulable`,
    waitForPodCompletionStartTime: `${p}-driver-upgrade-wait-for-pod-completion-start-time`,
    validationStartTime: `${p}-driver-upgrade-validation-start-time`,
    upgradeRequested: `${p}-driver-upgrade-requested`,
    upgradeReason: `${p}-driver-upgrade.reason`,
    stateStartTime: `${p}-driver-upgrade.state-start-time`,
    upgradeStartTime: `${p}-driver-upgrade.upgrade-start-time`,
    drainStartTime: `${p}-driver-upgrade-drain-start-time`,
    podDeletionStartTime: `${p}-driver-upgrade-pod-deletion-start-time`,
    devicePresent: `${fact}.present`,
    deviceCount: `${fact}.count`,
    driverVersion: `${fact}-driver.version`,
    driverReady: `${fact}-driver.ready`,
    nextKernel: `${fact}-driver.next-kernel`,
    nextKernelFailed: `${fact}-driver.next-kernel.failed`,
    moduleSignatures: `${fact}-driver.module-signatures`,
    kernelSignaturePolicy: `${fact}-driver.kernel-signature-policy`,
    driverReadyCondition: `${p}-driver-ready`,
    podRestartStartTime: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.pod-restart-start-time`,
    driverFailingSince: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.driver-failing-since`,
    failedRevision: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.failed-revision`,
    pausedOperands: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.paused-operands`,
    operandPauseStartTime: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.operand-pause-start-time`,
    clientsRecreated: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.clients-recreated`,
    clientsStopped: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.clients-stopped`,
    driverLoaded: `${fact}-driver-loaded`,
    restartOnly: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.restart-only`,
    lastStartTime: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.last-start-time`,
    upgradeDoneTime: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.done-time`,
    canary: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.canary`,
    canaryFailed: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.canary-failed`,
    notReadyFrozen: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.not-ready-frozen`,
    notReadyCountedFrom: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.not-ready-counted-from`,
    stoppedFor: `${OWN_KEY_DOMAIN}/${driver}-driver-upgrade.stopped-for`,
  };
}

/**
 * The domain and driver a state label key names, for any driver (`nvidia.com/ofed-driver-upgrade-state`
 * → `{ domain: 'nvidia.com', driver: 'ofed' }`); undefined for any other key. The inverse of
 * `driverKeys(driver, domain).upgradeState`.
 */
export function parseUpgradeStateKey(key: string): { readonly domain: string; readonly driver: string } | undefined {
  const slash = key.indexOf('/');
  if (slash <= 0 || !key.endsWith(UPGRADE_STATE_SUFFIX)) return undefined;
  const driver = key.slice(slash + 1, -UPGRADE_STATE_SUFFIX.length);
  return driver === '' ? undefined : { domain: key.slice(0, slash), driver };
}

/** Event reason, e.g. `GPUDriverUpgrade` for driver `gpu`, as the GPU Operator writes it. */
export function upgradeEventReason(driver: string): string {
  return `${driver.toUpperCase()}DriverUpgrade`;
}

/**
 * DriverRollout annotation (ours, written by `kubectl driver-rollout approve`): the rollout
 * revision whose canary is approved, exactly as the status's `canary.revision` names it. An
 * approval of one revision never lets another through.
 */
export const CANARY_APPROVED_REVISION_ANNOTATION = `${OWN_KEY_DOMAIN}/canary-approved-revision`;
/** DriverRollout annotation (ours, written with the one above): who approved (the user the API server authenticated). */
export const CANARY_APPROVED_BY_ANNOTATION = `${OWN_KEY_DOMAIN}/canary-approved-by`;

/**
 * Node annotation (ours, one for every driver and every release of the coordinator): who holds
 * the node's cordon, as comma-separated holders `<keyDomain>/<driverName>` (cordonHolderOf),
 * sorted. A driver adds itself when it cordons (or finds the node cordoned by another holder) and
 * removes itself when its upgrade is done; only the last holder uncordons. A cordoned node
 * without this annotation, or with it empty, was cordoned by none of ours (an admin, kured, a
 * maintenance operator, the autoscaler) and is never uncordoned by us. Written only with the
 * node's resourceVersion (a conflict re-reads the node, never overwrites another writer's list).
 */
export const CORDON_HOLDERS_ANNOTATION = `${OWN_KEY_DOMAIN}/cordon-holders`;

/** The holder a DriverRollout's driver writes into CORDON_HOLDERS_ANNOTATION: `<keyDomain>/<driverName>`. */
export function cordonHolderOf(keys: Pick<DriverKeys, 'domain' | 'driver'>): string {
  return `${keys.domain}/${keys.driver}`;
}

/**
 * Pod template annotation (ours) of a driver DaemonSet: who signed the modules its agent loads,
 * prebuilt in the image or built on the node: the signing certificate's subject common name, as
 * `modinfo -F signer` shows it, or `unsigned` (shared/kernel-signature-policy.ts UNSIGNED). Set
 * by the chart (drivers[].moduleSigner). The coordinator reads it from the newest
 * ControllerRevision and holds a node whose kernel, by its agent's KernelSignaturePolicy, would
 * refuse that signer, before cordoning it; absent: not known, the node is not judged by it.
 */
export const MODULE_SIGNER_ANNOTATION = `${OWN_KEY_DOMAIN}/module-signer`;

/** KWOK's annotation marking a node it manages (test bed and demo only). */
export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node';
