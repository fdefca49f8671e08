/**
 * One or more cases per state transition. Each case: a cluster, a policy, and what the plan must
 * do to node n1: its effects in order (state changes, cordon, pod deletions, evictions, driver
 * restarts), why it waits, and which annotations it writes.
 */
import { describe, expect, it } from 'vitest';
import type { NodeAction, ReasonCode } from '../../../../coordinator/plan/action.ts';
import type { PdbSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import type { DriverRolloutSpecInput } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { driverKeys } from '../../../../shared/keys.ts';
import {
  KEYS,
  NOW,
  aCluster,
  aNode,
  aPdb,
  aPod,
  aPolicy,
  actionsOf,
  annotationWrites,
  effectsOf,
  planAt,
  reasonOf,
  secondsAgo,
  type NodeBuilder,
  type UpgradePolicyInput,
} from './fixtures.ts';

interface Case {
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

const OFED = driverKeys('ofed');
const JOBS = { waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 } } as const;
const DELETION = { podDeletion: {} } as const;
const NO_DELETION = { podDeletion: { enable: false } } as const;
const DRAIN = { drain: { enable: true, timeoutSeconds: 300 } } as const;
const VALIDATION = { validation: { podSelector: 'app=nvidia-operator-validator', timeoutSeconds: 600 } } as const;
const gpuPod = (name: string) => aPod(name).requesting('nvidia.com/gpu');
/** A start's cordon, then the steps up to the driver restart, planned behind a check that the node's pods are still those seen (requireSamePods). */
const CORDON_AND_ON = ['cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required'] as const;
const DELETE_DRIVER = 'deleteDriverPod:gpu-operator/gpu-driver-n1';

const cases: Record<string, readonly Case[]> = {
  unknown: [
    { name: 'current driver pod → upgrade-done', node: aNode('n1'), effects: ['state:upgrade-done'] },
    {
      name: 'out-of-date driver pod → upgrade-required, starts, is cordoned and moves on to the driver restart',
      node: aNode('n1').outdated(),
      effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, DELETE_DRIVER],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'safe-load annotation with a current pod → upgrade-required, cordoned, the load released, uncordoned',
      node: aNode('n1').waitingForSafeLoad(),
      effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, 'clearSafeLoad', 'state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    },
    { name: 'no driver pod → waits', node: aNode('n1').withoutDriverPod(), effects: [], reason: 'no-driver-pod' },
  ],
  'upgrade-done': [
    { name: 'current → nothing', node: aNode('n1').inState('upgrade-done'), effects: [] },
    {
      name: 'new DaemonSet revision → upgrade-required → cordon-required → on to the driver restart',
      node: aNode('n1').inState('upgrade-done').outdated(),
      effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, DELETE_DRIVER],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'upgrade-requested annotation → upgrade-required; the annotation is consumed at the start',
      node: aNode('n1').inState('upgrade-done').annotated({ [KEYS.upgradeRequested]: 'true' }),
      effects: ['state:upgrade-required', 'state:cordon-required', ...CORDON_AND_ON, 'state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
      annotations: { [KEYS.upgradeRequested]: null },
    },
    {
      name: 'leftover bookkeeping annotations are removed',
      node: aNode('n1').inState('upgrade-done').annotated({ [KEYS.initialStateUnschedulable]: 'true', [KEYS.drainStartTime]: secondsAgo(9) }),
      effects: [],
      annotations: { [KEYS.initialStateUnschedulable]: null, [KEYS.drainStartTime]: null },
    },
  ],
  'upgrade-required': [
    {
      name: 'start records the start time and takes no initial-state mark on a schedulable node',
      node: aNode('n1').inState('upgrade-required').outdated(),
      effects: ['state:cordon-required', ...CORDON_AND_ON, DELETE_DRIVER],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.upgradeStartTime]: secondsAgo(0) },
    },
    {
      name: 'an admin-cordoned node gets the initial-state annotation and no cordon',
      node: aNode('n1').inState('upgrade-required').outdated().cordoned(),
      effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.initialStateUnschedulable]: 'true' },
    },
    {
      name: 'paused (autoUpgrade false) → waits',
      node: aNode('n1').inState('upgrade-required').outdated(),
      policy: { autoUpgrade: false },
      effects: [],
      reason: 'paused',
    },
    {
      name: 'skip label → waits',
      node: aNode('n1').inState('upgrade-required').outdated().labelled({ [KEYS.upgradeSkip]: 'true' }),
      effects: [],
      reason: 'skipped',
    },
    {
      name: 'no parallel slot → waits, naming the pool and the count',
      node: aNode('n1').inState('upgrade-required').outdated(),
      policy: { maxParallelUpgrades: 1 },
      // Outdated: it stays upgrading (its driver pod is restarted), so it hands no slot on.
      others: [aNode('n0').inState('drain-required').cordoned().outdated().with(aPod('w'))],
      effects: [],
      reason: 'no-slot',
      detail: /^no slot: 1\/1 upgrading in pool default$/,
    },
    {
      name: 'no unavailable slot → waits; an admin-cordoned node counts',
      node: aNode('n1').inState('upgrade-required').outdated(),
      policy: { maxUnavailable: 1 },
      others: [aNode('n0').cordoned()],
      effects: [],
      reason: 'no-slot',
      detail: /^no slot: 1\/1 unavailable in pool default$/,
    },
    {
      name: 'a NotReady node counts as unavailable',
      node: aNode('n1').inState('upgrade-required').outdated(),
      policy: { maxUnavailable: 1 },
      others: [aNode('n0').notReady()],
      effects: [],
      reason: 'no-slot',
    },
    {
      name: 'driver became current before the start (rollback) → upgrade-done',
      node: aNode('n1').inState('upgrade-required'),
      effects: ['state:upgrade-done'],
    },
    {
      name: 'a retry after a failed cycle keeps the initial-state annotation and the start time',
      node: aNode('n1')
        .inState('upgrade-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.upgradeStartTime]: secondsAgo(3600) }),
      policy: DRAIN,
      effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: {},
    },
  ],
  'cordon-required': [
    {
      name: 'schedulable → cordon, then the next steps from the pods seen, behind a check that they are still there once the cordon is stored',
      node: aNode('n1').inState('cordon-required').outdated().with(gpuPod('train')),
      policy: DELETION,
      effects: ['cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'evictPod:work/train'],
      reason: 'waiting-for-pod-deletion',
    },
    {
      name: 'already cordoned → moves on in the same pass',
      node: aNode('n1').inState('cordon-required').outdated().cordoned().with(gpuPod('train')),
      policy: DELETION,
      effects: ['state:wait-for-jobs-required', 'state:pod-deletion-required', 'evictPod:work/train'],
      reason: 'waiting-for-pod-deletion',
    },
  ],
  'wait-for-jobs-required': [
    {
      name: 'no podSelector → pod-deletion-required',
      node: aNode('n1').inState('wait-for-jobs-required').outdated().cordoned().with(aPod('job').labelled({ app: 'train' })),
      effects: ['state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'job pods running → waits, records the start time, wakes at the timeout',
      node: aNode('n1')
        .inState('wait-for-jobs-required')
        .outdated()
        .cordoned()
        .with(aPod('a').inNamespace('ml').labelled({ app: 'train' }), aPod('b').inNamespace('ml').labelled({ app: 'train' }), aPod('other')),
      policy: JOBS,
      effects: [],
      reason: 'waiting-for-jobs',
      detail: /^waiting for job pods: ml\/a, ml\/b \(0s of 600s\)$/,
      annotations: { [KEYS.waitForPodCompletionStartTime]: secondsAgo(0) },
      wakeAt: Math.floor(NOW / 1000) * 1000 + 600_000,
    },
    {
      name: 'resumes the recorded start time',
      node: aNode('n1')
        .inState('wait-for-jobs-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(120) })
        .with(aPod('a').inNamespace('ml').labelled({ app: 'train' })),
      policy: JOBS,
      effects: [],
      reason: 'waiting-for-jobs',
      detail: /\(120s of 600s\)$/,
      annotations: {},
    },
    {
      name: 'finished job pods do not hold the node',
      node: aNode('n1')
        .inState('wait-for-jobs-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(30) })
        .with(aPod('a').labelled({ app: 'train' }).inPhase('Succeeded')),
      policy: JOBS,
      effects: ['state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.waitForPodCompletionStartTime]: null },
    },
    {
      name: 'timeout → moves on to pod deletion',
      node: aNode('n1')
        .inState('wait-for-jobs-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(600) })
        .with(aPod('a').labelled({ app: 'train' })),
      policy: { ...JOBS, ...DELETION },
      effects: ['state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'timeoutSeconds 0 waits forever (no wake-up)',
      node: aNode('n1')
        .inState('wait-for-jobs-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.waitForPodCompletionStartTime]: secondsAgo(86_400) })
        .with(aPod('a').labelled({ app: 'train' })),
      policy: { waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 0 } },
      effects: [],
      reason: 'waiting-for-jobs',
      detail: /\(86400s, no timeout\)$/,
      wakeAt: null,
    },
  ],
  'pod-deletion-required': [
    {
      name: 'podDeletion.enable false → drain-required',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(gpuPod('train')),
      policy: { ...DRAIN, ...NO_DELETION },
      effects: ['state:drain-required', 'evictPod:work/train'],
      reason: 'waiting-for-eviction',
    },
    {
      name: 'evicts pods using the device (gpu and mig resources), not others, not DaemonSet pods',
      node: aNode('n1')
        .inState('pod-deletion-required')
        .outdated()
        .cordoned()
        .with(gpuPod('a'), aPod('b').requesting('cpu', 'nvidia.com/mig-1g.5gb'), aPod('web').requesting('cpu'), gpuPod('dcgm').ownedBy('DaemonSet'), gpuPod('gone').terminating()),
      policy: DELETION,
      effects: ['evictPod:work/a', 'evictPod:work/b'],
      reason: 'waiting-for-pod-deletion',
      annotations: { [KEYS.podDeletionStartTime]: secondsAgo(0) },
    },
    {
      name: 'podSelector adds device pods that request nothing',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(aPod('rdma').labelled({ net: 'rdma' })),
      policy: { podDeletion: { podSelector: 'net=rdma' } },
      effects: ['evictPod:work/rdma'],
      reason: 'waiting-for-pod-deletion',
    },
    {
      name: 'no device pod left → pod-restart-required, skipping drain',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(aPod('web').requesting('cpu')),
      policy: { ...DELETION, ...DRAIN },
      effects: ['state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'a pod no controller manages, without force → drain (enabled)',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(gpuPod('bare').ownedBy(null)),
      policy: { ...DELETION, drain: { enable: true, force: true } },
      effects: ['state:drain-required', 'evictPod:work/bare'],
      reason: 'waiting-for-eviction',
    },
    {
      name: 'a pod no controller manages, without force, drain disabled → upgrade-failed',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(gpuPod('bare').ownedBy(null)),
      policy: DELETION,
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /cannot delete device pods: work\/bare \(not managed by a controller; set podDeletion.force\); drain is not enabled/,
    },
    {
      name: 'a PDB refuses the eviction → waits naming the PDB, retried 5 s after the refusal',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().annotated({ [KEYS.podDeletionStartTime]: secondsAgo(10) }).with(gpuPod('train').labelled({ app: 'train' }).evictionRefused(NOW - 2_000)),
      pdbs: [aPdb('work', 'train-pdb', 'app=train', 0)],
      effects: [],
      reason: 'eviction-blocked',
      detail: /^evicting device pods: PDB work\/train-pdb blocks eviction of work\/train \(10s of 300s\)$/,
      wakeAt: NOW + 3_000,
    },
    {
      name: 'eviction still refused at the timeout, drain enabled → drain-required, the warning names the PDB',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().annotated({ [KEYS.podDeletionStartTime]: secondsAgo(300) }).with(gpuPod('train').labelled({ app: 'train' })),
      pdbs: [aPdb('work', 'train-pdb', 'app=train', 0)],
      policy: DRAIN,
      effects: ['state:drain-required', 'evictPod:work/train'],
      reason: 'eviction-blocked',
    },
    {
      name: 'eviction still refused at the timeout, drain disabled → upgrade-failed naming the PDB',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().annotated({ [KEYS.podDeletionStartTime]: secondsAgo(300) }).with(gpuPod('train').labelled({ app: 'train' })),
      pdbs: [aPdb('work', 'train-pdb', 'app=train', 0)],
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /^device pods not removed after 300s: PDB work\/train-pdb blocks eviction of work\/train; drain is not enabled/,
    },
    {
      name: 'force evicts unmanaged pods (kubectl drain --force)',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(gpuPod('bare').ownedBy(null)),
      policy: { podDeletion: { force: true } },
      effects: ['evictPod:work/bare'],
      reason: 'waiting-for-pod-deletion',
    },
    {
      name: 'emptyDir without deleteEmptyDir → upgrade-failed (drain disabled)',
      node: aNode('n1').inState('pod-deletion-required').outdated().cordoned().with(gpuPod('scratch').withEmptyDir()),
      policy: DELETION,
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
    },
    {
      name: 'timeout with pods still terminating → drain',
      node: aNode('n1')
        .inState('pod-deletion-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.podDeletionStartTime]: secondsAgo(300) })
        .with(gpuPod('slow').terminating()),
      policy: { ...DELETION, ...DRAIN },
      effects: ['state:drain-required'],
      reason: 'waiting-for-eviction',
      annotations: { [KEYS.podDeletionStartTime]: null, [KEYS.drainStartTime]: secondsAgo(0) },
    },
  ],
  'drain-required': [
    {
      name: 'drain disabled → pod-restart-required',
      node: aNode('n1').inState('drain-required').outdated().cordoned().with(aPod('web')),
      effects: ['state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'evicts every pod but DaemonSet, mirror, drain-skip and finished pods',
      node: aNode('n1')
        .inState('drain-required')
        .outdated()
        .cordoned()
        .with(
          aPod('web'),
          aPod('job').ownedBy('Job'),
          aPod('ds').ownedBy('DaemonSet'),
          aPod('static').mirror().ownedBy('Node'),
          aPod('keep').labelled({ [KEYS.drainSkip]: 'true' }),
          aPod('done').inPhase('Succeeded'),
        ),
      policy: DRAIN,
      effects: ['evictPod:work/web', 'evictPod:work/job'],
      reason: 'waiting-for-eviction',
      annotations: { [KEYS.drainStartTime]: secondsAgo(0) },
      wakeAt: Math.floor(NOW / 1000) * 1000 + 300_000,
    },
    {
      name: 'drain.podSelector limits what is evicted',
      node: aNode('n1').inState('drain-required').outdated().cordoned().with(aPod('a').labelled({ tier: 'batch' }), aPod('b')),
      policy: { drain: { enable: true, podSelector: 'tier=batch' } },
      effects: ['evictPod:work/a'],
      reason: 'waiting-for-eviction',
    },
    {
      name: 'a PDB allowing no disruption → reason names the PDB and the pod',
      node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(60) }).with(aPod('db-0').labelled({ app: 'db' })),
      pdbs: [aPdb('work', 'db-pdb', 'app=db', 0)],
      policy: DRAIN,
      effects: ['evictPod:work/db-0'],
      reason: 'eviction-blocked',
      detail: /^PDB work\/db-pdb blocks eviction of work\/db-0 \(60s of 300s\)$/,
    },
    {
      name: 'a refused eviction is retried only after 5 s; the pass wakes then',
      node: aNode('n1')
        .inState('drain-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.drainStartTime]: secondsAgo(60) })
        .with(aPod('db-0').evictionRefused(NOW - 2_000)),
      policy: DRAIN,
      effects: [],
      reason: 'eviction-blocked',
      detail: /eviction of work\/db-0 refused/,
      wakeAt: NOW + 3_000,
    },
    {
      name: 'a refused eviction older than 5 s is tried again',
      node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(60) }).with(aPod('db-0').evictionRefused(NOW - 6_000)),
      policy: DRAIN,
      effects: ['evictPod:work/db-0'],
      reason: 'eviction-blocked',
    },
    {
      name: 'drain timeout (kept across restarts in an annotation) → upgrade-failed naming the PDB',
      node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(300) }).with(aPod('db-0').labelled({ app: 'db' })),
      pdbs: [aPdb('work', 'db-pdb', 'app=db', 0)],
      policy: DRAIN,
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /^drain timed out after 300s: PDB work\/db-pdb blocks eviction of work\/db-0/,
      // The revision it failed at: a newer one retries the node by itself.
      annotations: { [KEYS.drainStartTime]: null, [KEYS.failedRevision]: 'gpu-driver=rev-new' },
    },
    {
      name: 'a pod no controller manages, without force → nothing is evicted, reason says why',
      node: aNode('n1').inState('drain-required').outdated().cordoned().with(aPod('bare').ownedBy(null), aPod('web')),
      policy: DRAIN,
      effects: [],
      reason: 'drain-blocked',
      detail: /work\/bare is not managed by a controller \(set drain.force\)/,
    },
    {
      name: 'emptyDir without deleteEmptyDir blocks; with it the pod is evicted',
      node: aNode('n1').inState('drain-required').outdated().cordoned().with(aPod('cache').withEmptyDir()),
      policy: { drain: { enable: true, deleteEmptyDir: true } },
      effects: ['evictPod:work/cache'],
      reason: 'waiting-for-eviction',
    },
    {
      name: 'evicted pods still terminating → waits without evicting again',
      node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(10) }).with(aPod('web').terminating()),
      policy: DRAIN,
      effects: [],
      reason: 'waiting-for-eviction',
    },
    {
      name: 'all pods gone → pod-restart-required',
      node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(10) }).with(aPod('ds').ownedBy('DaemonSet')),
      policy: DRAIN,
      effects: ['state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.drainStartTime]: null },
    },
  ],
  'pod-restart-required': [
    {
      name: 'out-of-date driver pod → deleted',
      node: aNode('n1').inState('pod-restart-required').outdated().cordoned(),
      effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'old pod terminating, no new one yet → waits',
      node: aNode('n1').inState('pod-restart-required').outdated().driverTerminating().cordoned(),
      effects: [],
      reason: 'waiting-for-driver-pod',
      detail: /DaemonSet to create the driver pod/,
    },
    {
      name: 'new pod not Ready → waits',
      node: aNode('n1').inState('pod-restart-required').driverNotReady(3).cordoned(),
      effects: [],
      reason: 'waiting-for-driver-pod',
      detail: /\(3 restarts\)$/,
    },
    {
      name: 'new pod not Ready after more than 10 restarts → upgrade-failed',
      node: aNode('n1').inState('pod-restart-required').driverNotReady(11).cordoned(),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
    },
    {
      name: 'new pod Ready, no validation → validation-required (passed) → uncordon-required → upgrade-done',
      node: aNode('n1').inState('pod-restart-required').cordoned(),
      effects: ['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    },
    {
      name: 'new pod Ready, validation configured → validation-required',
      node: aNode('n1').inState('pod-restart-required').cordoned(),
      policy: VALIDATION,
      effects: ['state:validation-required'],
      reason: 'waiting-for-validation',
    },
    {
      name: 'safe load: current pod → the annotation is removed instead of deleting the pod',
      node: aNode('n1').inState('pod-restart-required').waitingForSafeLoad().driverNotReady().cordoned(),
      effects: ['clearSafeLoad'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.waitForSafeLoad]: null },
    },
    {
      name: 'safe load with an out-of-date pod → the pod is replaced first, the annotation stays',
      node: aNode('n1').inState('pod-restart-required').waitingForSafeLoad().outdated().cordoned(),
      effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
    {
      name: 'a pod still using the device → the driver restart is held, naming the pod',
      node: aNode('n1').inState('pod-restart-required').outdated().cordoned().with(gpuPod('train')),
      effects: [],
      reason: 'device-in-use',
      detail: /^driver restart held: work\/train still uses the device \(0s of 900s\)$/,
    },
    {
      name: 'a device pod still terminating also holds the restart; a safe load is not released under it either',
      node: aNode('n1').inState('pod-restart-required').waitingForSafeLoad().driverNotReady().cordoned().with(gpuPod('leaving').terminating()),
      effects: [],
      reason: 'device-in-use',
      annotations: { [KEYS.waitForSafeLoad]: undefined },
    },
    {
      name: 'a device pod still there at podRestart.timeoutSeconds → upgrade-failed naming it',
      node: aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(900) }).with(aPod('static').mirror().requesting('nvidia.com/gpu')),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /driver restart held: work\/static still uses the device/,
    },
    {
      name: 'the restart’s start time is recorded when the state begins, with a wake-up at podRestart.timeoutSeconds',
      node: aNode('n1').inState('pod-restart-required').outdated().cordoned(),
      effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.podRestartStartTime]: secondsAgo(0) },
      wakeAt: Math.floor(NOW / 1000) * 1000 + 900_000,
    },
    {
      name: 'the agent reports a failure → waits with its reason and message; the failure’s start is recorded',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(200) }).driverFailing('CompileFailed', 'Failed: nvidia.ko: error: implicit declaration'),
      effects: [],
      reason: 'driver-failing',
      detail: /failing: CompileFailed: Failed: nvidia\.ko: error: implicit declaration \(0s of 120s\)$/,
      annotations: { [KEYS.driverFailingSince]: secondsAgo(0) },
      wakeAt: Math.floor(NOW / 1000) * 1000 + 120_000,
    },
    ...(['CompileFailed', 'KernelHeadersMissing', 'LoadFailed', 'DriverInUse', 'VerifyFailed', 'FirmwareMissing'] as const).map((why): Case => ({
      name: `${why} reported for podRestart.failAfterSeconds → upgrade-failed with the agent’s message`,
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(130), [KEYS.driverFailingSince]: secondsAgo(120) }).driverFailing(why, `Failed: ${why} on this node`),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: new RegExp(`^driver pod gpu-operator/gpu-driver-n1 failed: ${why}: Failed: ${why} on this node;`),
      annotations: { [KEYS.podRestartStartTime]: null, [KEYS.driverFailingSince]: null },
    })),
    {
      name: 'RebootRequired (a never-unload module) → upgrade-failed at once, saying the node needs a reboot',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(30) }).driverFailing('RebootRequired', 'Failed: reboot required: nvidia is set never to unload'),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /^node needs a reboot: driver pod gpu-operator\/gpu-driver-n1: Failed: reboot required: nvidia is set never to unload/,
    },
    {
      name: 'a failure seen before, the agent retrying now (Building) → still waits; the failure’s start is kept',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(300), [KEYS.driverFailingSince]: secondsAgo(200) }).driverNotReady(),
      effects: [],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.driverFailingSince]: undefined },
    },
    {
      name: 'failAfterSeconds 0 never fails on the agent’s reason alone',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(300) }).driverFailing('CompileFailed', 'Failed: make exited with 2'),
      policy: { podRestart: { failAfterSeconds: 0 } },
      effects: [],
      reason: 'driver-failing',
      annotations: { [KEYS.driverFailingSince]: undefined },
    },
    {
      name: 'Ready after a failure → moves on; both timers are removed',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(300), [KEYS.driverFailingSince]: secondsAgo(100) }),
      effects: ['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
      annotations: { [KEYS.podRestartStartTime]: null, [KEYS.driverFailingSince]: null },
    },
    {
      name: 'no Ready pod after podRestart.timeoutSeconds (image pull error) → upgrade-failed naming the kubelet’s reason',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(900) }).driverWaiting('agent: ImagePullBackOff: Back-off pulling image "driver:v3"'),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /^no Ready driver pod 900s after the restart began: gpu-operator\/gpu-driver-n1 agent: ImagePullBackOff/,
    },
    {
      name: 'an init container crash loop counts as restarts (upstream’s rule) and names the init container',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(60) }).driverWaiting('init container wait: CrashLoopBackOff: back-off 5m0s').driverNotReady(11),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /is not Ready after 11 restarts/,
    },
    {
      name: 'the old pod still terminating at podRestart.timeoutSeconds → upgrade-failed',
      node: aNode('n1').inState('pod-restart-required').outdated().driverTerminating().cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(901) }),
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /has not created one/,
    },
    {
      name: 'podRestart.timeoutSeconds 0 waits forever',
      node: aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(86_400) }).driverWaiting('agent: ErrImagePull: not found'),
      policy: { podRestart: { timeoutSeconds: 0 } },
      effects: [],
      reason: 'waiting-for-driver-pod',
      detail: /ErrImagePull: not found \(86400s, no timeout\)/,
      wakeAt: null,
    },
  ],
  'validation-required': [
    {
      name: 'a safe-load annotation re-set by a restarted driver pod is cleared (as upstream), the node keeps validating',
      node: aNode('n1').inState('validation-required').cordoned().waitingForSafeLoad().annotated({ [KEYS.validationStartTime]: secondsAgo(5) }).with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).notReady()),
      policy: VALIDATION,
      effects: ['clearSafeLoad'],
      reason: 'waiting-for-validation',
      annotations: { [KEYS.waitForSafeLoad]: null },
    },
    {
      name: 'validator pods Ready → uncordon-required → upgrade-done',
      node: aNode('n1').inState('validation-required').cordoned().annotated({ [KEYS.validationStartTime]: secondsAgo(5) }).with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).ownedBy('DaemonSet')),
      policy: VALIDATION,
      effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
      annotations: { [KEYS.validationStartTime]: null },
    },
    {
      name: 'validator not Ready → waits with the start time recorded',
      node: aNode('n1').inState('validation-required').cordoned().with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).notReady()),
      policy: VALIDATION,
      effects: [],
      reason: 'waiting-for-validation',
      annotations: { [KEYS.validationStartTime]: secondsAgo(0) },
      wakeAt: Math.floor(NOW / 1000) * 1000 + 600_000,
    },
    {
      name: 'no validator pod yet → waits',
      node: aNode('n1').inState('validation-required').cordoned(),
      policy: VALIDATION,
      effects: [],
      reason: 'waiting-for-validation',
      detail: /no validator pod/,
    },
    {
      name: 'configurable timeout → upgrade-failed',
      node: aNode('n1').inState('validation-required').cordoned().annotated({ [KEYS.validationStartTime]: secondsAgo(120) }),
      policy: { validation: { podSelector: 'app=nvidia-operator-validator', timeoutSeconds: 120 } },
      effects: ['state:upgrade-failed'],
      reason: 'upgrade-failed',
      detail: /^validation timed out after 120s/,
    },
  ],
  'uncordon-required': [
    {
      name: 'uncordon → upgrade-done; cycle annotations removed',
      node: aNode('n1').inState('uncordon-required').cordoned().annotated({ [KEYS.upgradeStartTime]: secondsAgo(600) }),
      effects: ['uncordon', 'state:upgrade-done'],
      annotations: { [KEYS.upgradeStartTime]: null },
    },
    {
      name: 'cordoned by an admin before the upgrade → stays cordoned',
      node: aNode('n1').inState('uncordon-required').cordonedByAdmin(),
      effects: ['state:upgrade-done'],
      annotations: { [KEYS.initialStateUnschedulable]: null },
    },
  ],
  'two drivers on one node (gpu here, ofed alongside)': [
    {
      name: 'uncordon-required while ofed still drains → upgrade-done, left cordoned for ofed',
      node: aNode('n1').inState('uncordon-required').cordoned().labelled({ [OFED.upgradeState]: 'drain-required' }),
      effects: ['state:upgrade-done'],
    },
    {
      name: 'uncordon-required while ofed is failed → left cordoned',
      node: aNode('n1').inState('uncordon-required').cordoned().labelled({ [OFED.upgradeState]: 'upgrade-failed' }),
      effects: ['state:upgrade-done'],
    },
    {
      name: 'uncordon-required while ofed is finishing too (uncordon-required) → uncordon',
      node: aNode('n1').inState('uncordon-required').cordoned().labelled({ [OFED.upgradeState]: 'uncordon-required' }),
      effects: ['uncordon', 'state:upgrade-done'],
    },
    {
      name: 'a driver of another domain counts too',
      node: aNode('n1').inState('uncordon-required').cordoned().labelled({ 'example.com/nic-driver-upgrade-state': 'pod-restart-required' }),
      effects: ['state:upgrade-done'],
    },
    {
      name: 'starting on a node ofed cordoned for its upgrade: not an admin cordon',
      node: aNode('n1').inState('upgrade-required').outdated().cordoned().labelled({ [OFED.upgradeState]: 'drain-required' }),
      effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.initialStateUnschedulable]: undefined },
    },
    {
      name: 'starting on a node ofed found cordoned by an admin: an admin cordon',
      node: aNode('n1')
        .inState('upgrade-required')
        .outdated()
        .cordoned()
        .labelled({ [OFED.upgradeState]: 'drain-required' })
        .annotated({ [OFED.initialStateUnschedulable]: 'true' }),
      effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.initialStateUnschedulable]: 'true' },
    },
  ],
  'upgrade-failed': [
    {
      name: 'a newer driver revision than the one it failed at → retried by itself (Warning), the failed revision kept',
      node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.failedRevision]: 'gpu-driver=rev-old', [KEYS.upgradeStartTime]: secondsAgo(900) }),
      effects: ['state:upgrade-required', 'state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      annotations: { [KEYS.failedRevision]: undefined },
    },
    {
      name: 'failed at the revision that is still the newest → stays failed',
      node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.failedRevision]: 'gpu-driver=rev-new' }),
      effects: [],
      reason: 'upgrade-failed',
      detail: /or push a new driver revision$/,
    },
    {
      name: 'halted: a failed node retried on a new revision still starts (it is already counted); a fresh node does not',
      node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.failedRevision]: 'gpu-driver=rev-old' }),
      others: [aNode('n2').inState('upgrade-done').outdated()],
      rest: { maxFailedNodes: 1 },
      effects: ['state:upgrade-required', 'state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
      otherReasons: { n2: 'halted' },
    },
    {
      name: 'driver still not Ready → stays, reason kept',
      node: aNode('n1').inState('upgrade-failed').cordoned().driverNotReady(20).annotated({ [KEYS.upgradeReason]: 'drain timed out after 300s' }),
      effects: [],
      reason: 'upgrade-failed',
      detail: /^drain timed out after 300s; relabel/,
      annotations: {},
    },
    {
      name: 'driver pod current and Ready → leaves by itself, uncordoned',
      node: aNode('n1').inState('upgrade-failed').cordoned(),
      effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    },
    {
      name: 'after a validation timeout it stays failed until the validator pods are Ready',
      node: aNode('n1').inState('upgrade-failed').cordoned().with(aPod('v').labelled({ app: 'nvidia-operator-validator' }).notReady()),
      policy: VALIDATION,
      effects: [],
      reason: 'upgrade-failed',
    },
    {
      name: 'validator pods Ready again → leaves failed',
      node: aNode('n1').inState('upgrade-failed').cordoned().with(aPod('v').labelled({ app: 'nvidia-operator-validator' })),
      policy: VALIDATION,
      effects: ['state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    },
    {
      name: 'an admin-cordoned node leaves failed without being uncordoned',
      node: aNode('n1').inState('upgrade-failed').cordonedByAdmin(),
      effects: ['state:uncordon-required', 'state:upgrade-done'],
    },
    {
      name: 'out-of-date pod stays failed (retry is explicit)',
      node: aNode('n1').inState('upgrade-failed').cordoned().outdated(),
      effects: [],
      reason: 'upgrade-failed',
    },
    {
      name: 'a retry does not inherit step timers an earlier attempt left behind',
      node: aNode('n1')
        .inState('upgrade-required')
        .outdated()
        .cordoned()
        .annotated({ [KEYS.upgradeStartTime]: secondsAgo(3600), [KEYS.drainStartTime]: secondsAgo(3000), [KEYS.validationStartTime]: secondsAgo(3000) })
        .with(aPod('web')),
      policy: { ...DRAIN, ...NO_DELETION },
      effects: ['state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:drain-required', 'evictPod:work/web'],
      reason: 'waiting-for-eviction',
      annotations: { [KEYS.drainStartTime]: secondsAgo(0), [KEYS.validationStartTime]: null },
    },
    {
      name: 'upgrade-requested annotation → retried',
      node: aNode('n1').inState('upgrade-failed').cordoned().outdated().annotated({ [KEYS.upgradeRequested]: 'true', [KEYS.upgradeStartTime]: secondsAgo(900) }),
      effects: ['state:upgrade-required', 'state:cordon-required', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
      reason: 'waiting-for-driver-pod',
    },
  ],
};

const STOP = { stop: true } as const;

const PLUGIN = 'nvidia.com/gpu.deploy.device-plugin';
const DCGM = 'nvidia.com/gpu.deploy.dcgm-exporter';
const plugin = aPod('device-plugin').inNamespace('gpu-operator').ownedBy('DaemonSet').selectingNodes(PLUGIN);

/** Device clients: operands paused through their labels, DaemonSet clients deleted, all back once the driver is Ready. */
cases['pod-restart-required: device clients'] = [
  {
    name: 'operand labels present → previous values recorded first, labels paused; the driver pod waits',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'true', [DCGM]: 'true' }).with(plugin),
    effects: [`label:${PLUGIN}=paused-for-driver-upgrade`, `label:${DCGM}=paused-for-driver-upgrade`],
    reason: 'waiting-for-clients',
    detail: /^waiting for device clients to leave: gpu-operator\/device-plugin \(0s of 300s\)$/,
    annotations: { [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true', [DCGM]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(0) },
  },
  {
    name: 'paused, the operand pod still terminating → waits',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(10) }).with(aPod('device-plugin').ownedBy('DaemonSet').selectingNodes(PLUGIN).terminating()),
    effects: [],
    reason: 'waiting-for-clients',
  },
  {
    name: 'operands gone → the driver pod is replaced',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(10) }),
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'a DaemonSet pod requesting the device, or matching clients.podSelector, is deleted at the same step',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().with(aPod('exporter').ownedBy('DaemonSet').requesting('nvidia.com/gpu'), aPod('imex').ownedBy('DaemonSet').labelled({ app: 'imex' }), aPod('logs').ownedBy('DaemonSet')),
    policy: { clients: { podSelector: 'app=imex' } },
    effects: ['deletePod:work/exporter', 'deletePod:work/imex'],
    reason: 'waiting-for-clients',
  },
  {
    name: 'clients still there at clients.timeoutSeconds → upgrade-failed naming them',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(300) }).with(plugin),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /^device clients still on the node 300s after they were stopped: gpu-operator\/device-plugin/,
  },
  {
    name: 'new driver Ready → previous label values restored, the record removed',
    node: aNode('n1').inState('pod-restart-required').cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade', [DCGM]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true', [DCGM]: 'false' }) }),
    effects: [`label:${PLUGIN}=true`, `label:${DCGM}=false`, 'state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    annotations: { [KEYS.pausedOperands]: null },
  },
  {
    name: 'a failed node recovering restores them before the uncordon',
    node: aNode('n1').inState('upgrade-failed').cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }) }),
    effects: ['state:uncordon-required', `label:${PLUGIN}=true`, 'uncordon', 'state:upgrade-done'],
  },
  {
    name: 'operandLabels [] leaves the labels alone',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'true' }).with(plugin),
    policy: { clients: { operandLabels: [] } },
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
];

/** Emergency stop: the same nodes as above, frozen. */
cases['emergency stop (upgradePolicy.stop)'] = [
  {
    name: 'draining: nothing is evicted, the node stays, reason stopped, the drain timer is dropped',
    node: aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: secondsAgo(100) }).with(aPod('web')),
    policy: { ...STOP, ...DRAIN },
    effects: [],
    reason: 'stopped',
    annotations: { [KEYS.drainStartTime]: null },
    wakeAt: null,
  },
  {
    name: 'pod-restart-required with an out-of-date pod: the driver pod is not restarted',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned(),
    policy: STOP,
    effects: [],
    reason: 'stopped',
  },
  {
    name: 'uncordon-required: stays cordoned',
    node: aNode('n1').inState('uncordon-required').cordoned(),
    policy: STOP,
    effects: [],
    reason: 'stopped',
  },
  {
    name: 'a new revision: labelled upgrade-required, does not start',
    node: aNode('n1').inState('upgrade-done').outdated(),
    policy: STOP,
    effects: ['state:upgrade-required'],
    reason: 'stopped',
  },
  {
    name: 'upgrade-failed keeps its failure as the reason and does not leave, even when Ready',
    node: aNode('n1').inState('upgrade-failed').cordoned().annotated({ [KEYS.upgradeReason]: 'drain timed out after 300s: x' }),
    policy: STOP,
    effects: [],
    reason: 'upgrade-failed',
    detail: /^drain timed out after 300s: x \(stopped: /,
  },
  {
    name: 'cleared: resumes where it stopped, the drain timer starting afresh',
    node: aNode('n1').inState('drain-required').outdated().cordoned().with(aPod('web')),
    policy: DRAIN,
    effects: ['evictPod:work/web'],
    reason: 'waiting-for-eviction',
    annotations: { [KEYS.drainStartTime]: secondsAgo(0) },
  },
];

/**
 * A restart running its normal course (old pod deleted, no new pod yet, new pod starting) keeps
 * one reason text, so it costs no Node write beyond its state change (issue 16: these reason-only
 * patches were 2 of ~13 writes per upgraded node); the pod names are in the detail. A pod stuck in
 * a kubelet waiting reason gets a text of its own.
 */
describe('the reason while the driver pod restarts', () => {
  const TEXT = 'restarting the driver pod (timeout 900s)';
  const phases = {
    'old pod still there': aNode('n1').inState('pod-restart-required').outdated().cordoned(),
    'old pod terminating, no new one yet': aNode('n1').inState('pod-restart-required').outdated().driverTerminating().cordoned(),
    'no driver pod at all': aNode('n1').inState('pod-restart-required').withoutDriverPod().cordoned(),
    'new pod starting': aNode('n1').inState('pod-restart-required').driverNotReady().cordoned(),
  };

  it.each(Object.entries(phases))('%s: the same text, so no reason write', (_phase, node) => {
    const plan = planAt(aCluster([node.annotated({ [KEYS.upgradeReason]: TEXT, [KEYS.podRestartStartTime]: secondsAgo(1) })]), aPolicy({}));
    expect(reasonOf(plan, 'n1')?.message).toBe(TEXT);
    expect(annotationWrites(plan, 'n1')[KEYS.upgradeReason]).toBeUndefined();
  });

  it('the details still name the pods', () => {
    const deleting = planAt(aCluster([phases['old pod still there']]), aPolicy({}));
    expect(reasonOf(deleting, 'n1')?.detail).toMatch(/^deleting out-of-date driver pod gpu-operator\/gpu-driver-n1 /);
    const starting = planAt(aCluster([phases['new pod starting']]), aPolicy({}));
    expect(reasonOf(starting, 'n1')?.detail).toMatch(/^waiting for driver pod gpu-operator\/gpu-driver-n1 to become Ready /);
  });

  it('a new pod stuck in a kubelet waiting reason is named with it in the text', () => {
    const node = aNode('n1').inState('pod-restart-required').driverWaiting('agent: ImagePullBackOff: no such image').cordoned().annotated({ [KEYS.upgradeReason]: TEXT });
    const plan = planAt(aCluster([node]), aPolicy({}));
    expect(reasonOf(plan, 'n1')?.message).toBe('waiting for the driver pod to become Ready: gpu-operator/gpu-driver-n1 agent: ImagePullBackOff: no such image (timeout 900s)');
    expect(annotationWrites(plan, 'n1')[KEYS.upgradeReason]).toBe(reasonOf(plan, 'n1')?.message);
  });
});

describe('planUpgrades transitions', () => {
  for (const [state, list] of Object.entries(cases)) {
    describe(`from ${state}`, () => {
      it.each(list.map((c) => [c.name, c] as const))('%s', (_name, c) => {
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
});

/**
 * A DaemonSet recreates a deleted client pod at once (its pods tolerate the cordon): only pods
 * created before the step began (operandPauseStartTime) are deleted and waited for; a replacement
 * gets one Warning Event per DaemonSet, recorded on the node so later passes stay quiet.
 */
describe('device clients recreated by their DaemonSet', () => {
  const CLIENTS: UpgradePolicyInput = { clients: { podSelector: 'app=exporter', operandLabels: [] } };
  const original = () => aPod('exporter-a').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(3600);
  const replacement = () => aPod('exporter-b').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(5);
  const replacementNow = () => aPod('exporter-b').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(0);
  const stepping = () => aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(10) });
  const warnings = (actions: readonly NodeAction[]): string[] => actions.flatMap((a) => (a.kind === 'emitEvent' && a.type === 'Warning' ? [a.message] : []));

  it('a pod created before the step is deleted and waited for; the replacement created after it is neither', () => {
    const plan = planAt(aCluster([stepping().with(original(), replacement())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deletePod:work/exporter-a']);
    expect(reasonOf(plan, 'n1')?.code).toBe('waiting-for-clients');
    expect(reasonOf(plan, 'n1')?.detail).toMatch(/^waiting for device clients to leave: work\/exporter-a \(10s of 300s\)$/);
  });

  it('a terminating original is still waited for, the replacement is not deleted', () => {
    const plan = planAt(aCluster([stepping().with(original().terminating(), replacement())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')?.detail).toMatch(/^waiting for device clients to leave: work\/exporter-a /);
  });

  it('only the replacement left → the driver pod is replaced, with one Warning naming the DaemonSet and operandLabels', () => {
    const plan = planAt(aCluster([stepping().with(replacement())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
    const sent = warnings(actionsOf(plan, 'n1'));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^DaemonSet work\/exporter recreated its device client work\/exporter-b .*clients\.operandLabels.*DriverInUse/);
    expect(annotationWrites(plan, 'n1')[KEYS.clientsRecreated]).toBe('work/exporter');
  });

  it('a DaemonSet already warned about is not warned about again', () => {
    const node = stepping().annotated({ [KEYS.clientsRecreated]: 'work/exporter' }).with(replacement());
    const plan = planAt(aCluster([node]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
    expect(warnings(actionsOf(plan, 'n1'))).toEqual([]);
    expect(annotationWrites(plan, 'n1')[KEYS.clientsRecreated]).toBeUndefined();
  });

  it('first pass of the step (no start recorded yet): every client there is older, deleted and waited for', () => {
    const node = aNode('n1').inState('pod-restart-required').outdated().cordoned().with(original(), replacement());
    const plan = planAt(aCluster([node]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deletePod:work/exporter-a', 'deletePod:work/exporter-b']);
    expect(warnings(actionsOf(plan, 'n1'))).toEqual([]);
    expect(annotationWrites(plan, 'n1')[KEYS.operandPauseStartTime]).toBe(secondsAgo(0));
  });

  it('first pass: the clients it deletes are recorded on the node before the deletions', () => {
    const node = aNode('n1').inState('pod-restart-required').outdated().cordoned().with(original());
    const actions = actionsOf(planAt(aCluster([node]), aPolicy(CLIENTS)), 'n1');
    const record = actions.findIndex((a) => a.kind === 'setAnnotation' && a.key === KEYS.clientsStopped);
    expect(record).toBeGreaterThanOrEqual(0);
    expect(actions[record]).toMatchObject({ value: 'work/exporter-a' });
    expect(record).toBeLessThan(actions.findIndex((a) => a.kind === 'deletePod'));
  });

  // CI at 33c9c03: on a fast machine the exporter was created, the driver installed and upgraded
  // within one second, so by creation time alone the original looked like its own replacement:
  // never deleted, and warned about as recreated.
  it('a client created in the step\'s first second but there before it is deleted on the first pass and waited for after', () => {
    const sameSecond = () => aPod('exporter-a').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(0);
    const first = planAt(aCluster([aNode('n1').inState('pod-restart-required').outdated().cordoned().with(sameSecond())]), aPolicy(CLIENTS));
    expect(effectsOf(first, 'n1')).toEqual(['deletePod:work/exporter-a']);
    expect(annotationWrites(first, 'n1')[KEYS.clientsStopped]).toBe('work/exporter-a');
    const started = aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(0), [KEYS.clientsStopped]: 'work/exporter-a' });
    const next = planAt(aCluster([started.with(sameSecond().terminating(), replacementNow())]), aPolicy(CLIENTS));
    expect(effectsOf(next, 'n1')).toEqual([]);
    expect(reasonOf(next, 'n1')?.detail).toMatch(/^waiting for device clients to leave: work\/exporter-a /);
    expect(warnings(actionsOf(next, 'n1'))).toHaveLength(1);
  });

  it('the original gone, its same-second replacement is not deleted: the driver pod is replaced', () => {
    const started = aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(0), [KEYS.clientsStopped]: 'work/exporter-a' });
    const plan = planAt(aCluster([started.with(replacementNow())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
  });

  it('the record goes with the step when the new driver is Ready', () => {
    const node = aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(60), [KEYS.clientsRecreated]: 'work/exporter', [KEYS.clientsStopped]: 'work/exporter-a' }).with(replacement());
    const plan = planAt(aCluster([node]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done']);
    expect(annotationWrites(plan, 'n1')[KEYS.clientsRecreated]).toBeNull();
    expect(annotationWrites(plan, 'n1')[KEYS.clientsStopped]).toBeNull();
  });
});
