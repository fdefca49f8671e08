/**
 * The Secure Boot start check (coordinator/plan/signature-refusal.ts) through the whole planner:
 * a node whose agent says its kernel would refuse the newest template's driver is not started,
 * with a reason naming the key and how to enroll it; the verdict counts only for the driver
 * identity it was made for, and the check takes its documented place in the order of holds.
 */
import { describe, expect, it } from 'vitest';
import { driverFingerprint, parseLoadedDriver, renderLoadedDriver, type DriverIdentity } from '../../../../shared/driver-identity.ts';
import { renderSignatureVerdict, type SignatureVerdict } from '../../../../shared/module-signature-verdict.ts';
import { DRIVER_DAEMONSET, DRIVER_NAMESPACE, KEYS, NEW_REVISION, aCluster, aNode, aPolicy, effectsOf, planAt, reasonOf, type TemplateCase } from './fixtures.ts';

const OLD_DRIVER: DriverIdentity = { version: '550.127.05', modules: ['nvidia'], loadPlan: 'nvidia', loadOptional: [], parameters: {} };
const OLD = driverFingerprint(OLD_DRIVER);
/** The newest template's driver. */
const NEW = driverFingerprint({ ...OLD_DRIVER, version: '570.86.15' });

const REFUSED: SignatureVerdict = {
  fingerprint: NEW,
  kernel: '6.1.0-50-amd64',
  enforcedBy: ['module.sig_enforce'],
  untrusted: [
    { module: 'nvidia', signedBy: '"driver-rollout signing key" (key 1A:2B:3C)' },
    { module: 'nvidia_uvm', signedBy: '"driver-rollout signing key" (key 1A:2B:3C)' },
  ],
  trustedKeys: ['Debian Secure Boot CA'],
};
const TRUSTED: SignatureVerdict = { ...REFUSED, untrusted: [] };
const NOT_ENFORCED: SignatureVerdict = { ...REFUSED, enforcedBy: [], untrusted: [] };

const verdict = (v: SignatureVerdict) => ({ [KEYS.moduleSignatures]: renderSignatureVerdict(v) });
/** What the agent of n1's pod published as loaded (the restart-only path compares it). */
const LOADED_OLD = { [KEYS.driverLoaded]: renderLoadedDriver({ pod: `${DRIVER_NAMESPACE}/gpu-driver-n1`, fingerprint: OLD }) };
const START = ['state:cordon-required', 'cordon', 'requireSamePods', 'state:wait-for-jobs-required', 'state:pod-deletion-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'];

const waiting = () => aNode('n1').inState('upgrade-required').outdated();

const cases: readonly TemplateCase[] = [
  {
    name: 'the kernel would refuse the new driver: not started, the reason names the kernel, the modules, the key and how to enroll it',
    node: waiting().annotated(verdict(REFUSED)),
    effects: [],
    reason: 'module-signature-untrusted',
    message: new RegExp(
      '^not started: kernel 6\\.1\\.0-50-amd64: the kernel enforces module signatures \\(module\\.sig_enforce\\) and would refuse the gpu driver of the newest template: ' +
        'nvidia, nvidia_uvm signed by "driver-rollout signing key" \\(key 1A:2B:3C\\), a key not in its trusted keyrings; the keys it trusts: Debian Secure Boot CA; ' +
        'sign the modules with an enrolled key, or enroll the signing certificate \\(mokutil --import <certificate\\.der>, then confirm it in MokManager at the next boot\\); ' +
        'starts once the agent on the node reports them trusted$',
    ),
  },
  { name: 'the verdict says trusted: starts', node: waiting().annotated(verdict(TRUSTED)), effects: START, reason: 'waiting-for-driver-pod' },
  { name: 'the kernel does not enforce signatures: starts', node: waiting().annotated(verdict(NOT_ENFORCED)), effects: START, reason: 'waiting-for-driver-pod' },
  { name: 'no verdict (no agent of the new driver has run there): starts', node: waiting(), effects: START, reason: 'waiting-for-driver-pod' },
  {
    name: 'a refusal of the old build (the driver running now) does not hold the new one',
    node: waiting().annotated(verdict({ ...REFUSED, fingerprint: OLD })),
    effects: START,
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'a template whose driver is not known (valueFrom, flags) is not judged',
    node: waiting().annotated(verdict(REFUSED)),
    template: null,
    effects: START,
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'a verdict that does not parse holds the node, naming the annotation: never read as trusted',
    node: waiting().annotated({ [KEYS.moduleSignatures]: '{"driver":"570"}' }),
    effects: [],
    reason: 'module-signature-untrusted',
    message: /^not started: node\/n1: annotation driver-rollout\.io\/gpu-driver\.module-signatures is not the agent's module-signature verdict: .*; the agent writes it again at its next load$/,
  },
  {
    name: 'a node in upgrade-done with a newer template: moves to upgrade-required and is held there',
    node: aNode('n1').inState('upgrade-done').outdated().annotated(verdict(REFUSED)),
    effects: ['state:upgrade-required'],
    reason: 'module-signature-untrusted',
  },
  {
    name: 'restart only (the template loads the driver already loaded): nothing is loaded, so nothing is refused',
    node: aNode('n1').inState('upgrade-done').outdated().annotated({ ...LOADED_OLD, ...verdict({ ...REFUSED, fingerprint: OLD }) }),
    template: OLD,
    effects: ['state:upgrade-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  // The order of holds (coordinator/README.md): the node's own exclusions before it, the rollout's gates after.
  { name: 'skipped wins over it', node: waiting().annotated(verdict(REFUSED)).labelled({ [KEYS.upgradeSkip]: 'true' }), effects: [], reason: 'skipped' },
  { name: 'paused wins over it', node: waiting().annotated(verdict(REFUSED)), policy: { autoUpgrade: false }, effects: [], reason: 'paused' },
  {
    name: 'it wins over no slot: the node says why it could not start even with a slot free',
    node: waiting().annotated(verdict(REFUSED)),
    policy: { maxParallelUpgrades: 1 },
    others: [aNode('n2').inState('drain-required').cordoned()],
    effects: [],
    reason: 'module-signature-untrusted',
  },
  {
    name: 'it takes no slot: the next node starts instead',
    node: waiting().annotated(verdict(REFUSED)),
    policy: { maxParallelUpgrades: 1 },
    others: [aNode('n2').inState('upgrade-required').outdated()],
    effects: [],
    reason: 'module-signature-untrusted',
  },
];

describe('the Secure Boot start check in planUpgrades', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const cluster = aCluster([c.node, ...(c.others ?? [])]);
    const template = c.template === undefined ? NEW : c.template;
    // As the shell reads the agent's loaded-driver annotation (coordinator/cluster/build-snapshot.ts).
    const nodes = cluster.nodes.map((n) => ({ ...n, loadedDriver: parseLoadedDriver(n.annotations[KEYS.driverLoaded]) }));
    const plan = planAt({ ...cluster, nodes, daemonSets: [{ namespace: DRIVER_NAMESPACE, name: DRIVER_DAEMONSET, updatedRevisionHash: NEW_REVISION, templateFingerprint: template }] }, aPolicy(c.policy ?? {}));
    expect(effectsOf(plan, 'n1')).toEqual(c.effects);
    const reason = reasonOf(plan, 'n1');
    expect(reason?.code).toBe(c.reason);
    if (c.message !== undefined) expect(reason?.message).toMatch(c.message);
    if (c.name.startsWith('it takes no slot')) expect(effectsOf(plan, 'n2')[0]).toBe('state:cordon-required');
  });
});
