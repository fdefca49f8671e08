/** The drain: evictions, PDBs, the timeout. */
import { KEYS, NOW, aNode, aPdb, aPod, secondsAgo } from '../fixtures.ts';
import { DRAIN, specifyTransitions, type TransitionCase } from './transition-cases.ts';

const CASES: readonly TransitionCase[] = [
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
];

specifyTransitions('drain-required', CASES);
