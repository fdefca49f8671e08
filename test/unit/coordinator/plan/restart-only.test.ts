/**
 * The restart-only path (coordinator/plan/restart-only.ts), in the style of the transition tables (states/transition-cases.ts):
 * one case per situation, what the plan does to node n1, why it waits, which annotations it writes.
 */
import { describe, expect, it } from 'vitest';
import { driverFingerprint, parseLoadedDriver, renderLoadedDriver, type DriverIdentity } from '../../../../shared/driver-identity.ts';
import {
  DRIVER_DAEMONSET,
  DRIVER_NAMESPACE,
  KEYS,
  NEW_REVISION,
  aCluster,
  aNode,
  aPod,
  aPolicy,
  actionsOf,
  annotationWrites,
  effectsOf,
  planAt,
  reasonOf,
  secondsAgo,
  type TemplateCase,
} from './fixtures.ts';

const DRIVER: DriverIdentity = { version: '570.86.15', modules: ['nvidia'], loadPlan: 'nvidia', loadOptional: [], parameters: { nvidia: { NVreg_EnableGpuFirmware: '1' } } };
const SAME = driverFingerprint(DRIVER);
const NEW_VERSION = driverFingerprint({ ...DRIVER, version: '580.65.06' });
const NEW_PARAMETERS = driverFingerprint({ ...DRIVER, parameters: { nvidia: { NVreg_EnableGpuFirmware: '0' } } });

/** The agent of n1's driver pod (the fixture names it gpu-driver-<node>) published what it loaded. */
const loadedBy = (pod: string, fingerprint = SAME) => ({ [KEYS.driverLoaded]: renderLoadedDriver({ pod: `${DRIVER_NAMESPACE}/${pod}`, fingerprint }) });
const LOADED = loadedBy('gpu-driver-n1');
const RESTART_ONLY = { [KEYS.restartOnly]: 'true', [KEYS.upgradeStartTime]: secondsAgo(30) };
const gpuPod = (name: string) => aPod(name).requesting('nvidia.com/gpu');
const OPERAND = 'nvidia.com/gpu.deploy.device-plugin';
/** The full path's start: cordoned, then on to the driver restart behind a check of the node's pods (requireSamePods). */
const CORDON_AND_ON = ['cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'];
const FULL_START = ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON];
const FULL = { effects: FULL_START, reason: 'waiting-for-driver-pod' } as const;

interface Case extends TemplateCase {
  readonly annotations?: Readonly<Record<string, string | null | undefined>>;
  /** An Event on n1 whose message matches. */
  readonly event?: RegExp;
}

const cases: Record<string, readonly Case[]> = {
  'starting (upgrade-done → upgrade-required → ...)': [
    {
      name: 'same driver, image-only change: straight to pod restart, no cordon, no drain, pod deleted at once',
      node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED),
      policy: { drain: { enable: true } },
      effects: ['state:upgrade-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      message: /^restart only: driver unchanged: restarting the driver pod \(timeout \d+s\)$/,
      annotations: { [KEYS.restartOnly]: 'true', [KEYS.upgradeStartTime]: secondsAgo(0), [KEYS.podRestartStartTime]: secondsAgo(0) },
      event: /^restart only: driver unchanged: the new template loads 570\.86\.15 with the same modules and parameters as loaded by gpu-operator\/gpu-driver-n1/,
    },
    {
      name: 'same driver with a GPU pod running and an operand label: neither evicted nor paused',
      node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED).labelled({ [OPERAND]: 'true' }).with(gpuPod('train'), aPod('plugin').ownedBy('DaemonSet').selectingNodes(OPERAND)),
      policy: { clients: { operandLabels: [OPERAND] } },
      effects: ['state:upgrade-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'cordoned by an admin: recorded as for the full path, and the cordon left alone',
      node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED).cordoned(),
      effects: ['state:upgrade-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.initialStateUnschedulable]: 'true' },
    },
    { name: 'new driver version: full path', node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED), template: NEW_VERSION, ...FULL },
    { name: 'new module parameters: full path', node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED), template: NEW_PARAMETERS, ...FULL },
    { name: 'template does not say what it loads: full path', node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED), template: null, ...FULL },
    { name: 'nothing published (an older agent): full path', node: aNode('n1').inState('upgrade-done').outdated(), ...FULL },
    {
      name: 'published by another pod (a lagging write, or from before a reboot): full path',
      node: aNode('n1').inState('upgrade-done').outdated().annotated(loadedBy('gpu-driver-old')),
      ...FULL,
    },
    {
      name: 'driver pod not Ready (its agent has not verified the load): full path',
      node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED).driverNotReady(),
      ...FULL,
    },
    { name: 'a safe-load request (a pod starting afresh): full path', node: aNode('n1').inState('upgrade-done').outdated().annotated(LOADED).waitingForSafeLoad(), ...FULL },
    {
      name: 'the upgrade-requested annotation asks for the full path',
      node: aNode('n1').inState('upgrade-done').outdated().annotated({ ...LOADED, [KEYS.upgradeRequested]: 'true' }),
      ...FULL,
    },
    {
      name: 'a retried failed cycle: full path',
      node: aNode('n1').inState('upgrade-required').outdated().cordoned().annotated({ ...LOADED, [KEYS.upgradeStartTime]: secondsAgo(600) }),
      effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      message: /^restarting the driver pod /,
      annotations: { [KEYS.restartOnly]: undefined },
    },
    {
      name: 'no free slot: waits like any other start (the restart counts as in flight)',
      node: aNode('n1').inState('upgrade-required').outdated().annotated(LOADED),
      policy: { maxParallelUpgrades: 1 },
      others: [aNode('n2').inState('pod-restart-required').outdated().annotated({ ...loadedBy('gpu-driver-n2'), ...RESTART_ONLY })],
      effects: [],
      reason: 'no-slot',
    },
    {
      name: 'paused: does not start',
      node: aNode('n1').inState('upgrade-required').outdated().annotated(LOADED),
      policy: { autoUpgrade: false },
      effects: [],
      reason: 'paused',
    },
  ],
  'pod-restart-required (restart only)': [
    {
      name: 'the new pod is created but not Ready: waits, saying restart only',
      node: aNode('n1').inState('pod-restart-required').driverNotReady().annotated({ ...LOADED, ...RESTART_ONLY, [KEYS.podRestartStartTime]: secondsAgo(5) }).with(gpuPod('train')),
      effects: [],
      reason: 'waiting-for-driver-pod',
      message: /^restart only: driver unchanged: restarting the driver pod /,
    },
    {
      name: "the new pod's init container asks for a safe load: released at once, no cordon, GPU pod stays",
      node: aNode('n1').inState('pod-restart-required').driverNotReady().waitingForSafeLoad().annotated({ ...LOADED, ...RESTART_ONLY, [KEYS.podRestartStartTime]: secondsAgo(5) }).with(gpuPod('train')),
      effects: ['clearSafeLoad'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'Ready → upgrade-done without uncordon or validation; the cycle bookkeeping goes',
      node: aNode('n1').inState('pod-restart-required').annotated({ ...LOADED, ...RESTART_ONLY, [KEYS.podRestartStartTime]: secondsAgo(5) }),
      policy: { validation: { podSelector: 'app=validator', timeoutSeconds: 600 } },
      effects: ['state:upgrade-done'],
      annotations: { [KEYS.restartOnly]: null, [KEYS.upgradeStartTime]: null, [KEYS.podRestartStartTime]: null },
    },
    {
      name: "Ready on an admin-cordoned node: stays cordoned, the admin's record goes with the cycle",
      node: aNode('n1').inState('pod-restart-required').cordonedByAdmin().annotated({ ...LOADED, ...RESTART_ONLY }),
      effects: ['state:upgrade-done'],
      annotations: { [KEYS.initialStateUnschedulable]: null },
    },
    {
      name: 'the template changed again to a new version before the pod was deleted: the full path from the cordon',
      node: aNode('n1').inState('pod-restart-required').outdated().annotated({ ...LOADED, ...RESTART_ONLY }),
      template: NEW_VERSION,
      effects: ['state:cordon-required', ...CORDON_AND_ON],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.restartOnly]: null },
      event: /no longer a restart only/,
    },
    {
      name: 'the agent fails to load the same driver: upgrade-failed after failAfterSeconds as on the full path',
      node: aNode('n1').inState('pod-restart-required').driverFailing('DriverInUse', 'driver is in use: nvidia').annotated({ ...LOADED, ...RESTART_ONLY, [KEYS.podRestartStartTime]: secondsAgo(400), [KEYS.driverFailingSince]: secondsAgo(400) }),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      message: /DriverInUse/,
    },
  ],
};

describe('planUpgrades restart-only path', () => {
  for (const [group, list] of Object.entries(cases)) {
    describe(group, () => {
      it.each(list.map((c) => [c.name, c] as const))('%s', (_name, c) => {
        const cluster = aCluster([c.node, ...(c.others ?? [])]);
        const template = c.template === undefined ? SAME : c.template;
        // As the shell reads the agent's annotation (coordinator/cluster/build-snapshot.ts).
        const nodes = cluster.nodes.map((n) => ({ ...n, loadedDriver: parseLoadedDriver(n.annotations[KEYS.driverLoaded]) }));
        const withTemplate = { ...cluster, nodes, daemonSets: [{ namespace: DRIVER_NAMESPACE, name: DRIVER_DAEMONSET, updatedRevisionHash: NEW_REVISION, templateFingerprint: template }] };
        const plan = planAt(withTemplate, aPolicy(c.policy ?? {}));
        expect(effectsOf(plan, 'n1')).toEqual(c.effects);
        const reason = reasonOf(plan, 'n1');
        expect(reason?.code).toBe(c.reason);
        if (c.message !== undefined) expect(reason?.message).toMatch(c.message);
        const writes = annotationWrites(plan, 'n1');
        for (const [key, value] of Object.entries(c.annotations ?? {})) expect(writes[key], key).toBe(value);
        if (c.event !== undefined) {
          const events = actionsOf(plan, 'n1').flatMap((a) => (a.kind === 'emitEvent' ? [a.message] : []));
          expect(events.some((m) => c.event?.test(m) === true), events.join('\n')).toBe(true);
        }
      });
    });
  }
});
