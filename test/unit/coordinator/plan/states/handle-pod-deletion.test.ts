/** Deleting the pods that use the device. */
import { KEYS, NOW, aNode, aPdb, aPod, secondsAgo } from '../fixtures.ts';
import { DELETION, NO_DELETION, DRAIN, gpuPod, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
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
];

specifyTransitions('pod-deletion-required', CASES);
