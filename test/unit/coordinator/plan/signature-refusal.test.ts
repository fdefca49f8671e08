/**
 * The Secure Boot start check (coordinator/plan/signature-refusal.ts) through the whole planner:
 * a node whose agent says its kernel would refuse the newest template's driver is not started,
 * with a reason naming the key and how to enroll it; the verdict counts only for the driver
 * identity it was made for, and the check takes its documented place in the order of holds.
 * Before any agent of the new build has run on a node, the signer the newest template declares is
 * judged against the node's own facts (the kernel's policy and keys, published by the agent
 * running there now): the first node of a refusing kernel is not cordoned either.
 */
import { describe, expect, it } from 'vitest';
import { driverFingerprint, parseLoadedDriver, renderLoadedDriver, type DriverIdentity } from '../../../../shared/driver-identity.ts';
import { renderSignatureVerdict, type SignatureVerdict } from '../../../../shared/module-signature-verdict.ts';
import { renderKernelSignaturePolicy, type KernelSignaturePolicy } from '../../../../shared/kernel-signature-policy.ts';
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

/**
 * Plans `c` with the newest template declaring `signer` (MODULE_SIGNER_ANNOTATION; null: nothing)
 * on nodes that report running `running` (null: unknown), and checks what n1 does and says.
 */
function expectPlanned(c: TemplateCase, signer: string | null, running: string | null): void {
  const cluster = aCluster([c.node, ...(c.others ?? [])]);
  const template = c.template === undefined ? NEW : c.template;
  // As the shell reads the node (coordinator/cluster/snapshot-of-object.ts) and its loaded-driver annotation.
  const nodes = cluster.nodes.map((n) => ({ ...n, kernelVersion: running, loadedDriver: parseLoadedDriver(n.annotations[KEYS.driverLoaded]) }));
  const daemonSet = { namespace: DRIVER_NAMESPACE, name: DRIVER_DAEMONSET, updatedRevisionHash: NEW_REVISION, templateFingerprint: template, templateModuleSigner: signer };
  const plan = planAt({ ...cluster, nodes, daemonSets: [daemonSet] }, aPolicy(c.policy ?? {}));
  expect(effectsOf(plan, 'n1')).toEqual(c.effects);
  const reason = reasonOf(plan, 'n1');
  expect(reason?.code).toBe(c.reason);
  if (c.message !== undefined) expect(reason?.message).toMatch(c.message);
  if (c.name.startsWith('it takes no slot')) expect(effectsOf(plan, 'n2')[0]).toBe('state:cordon-required');
}

describe('the Secure Boot start check in planUpgrades', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    expectPlanned(c, null, null);
  });
});

/** The node's own facts, as the agent running there now (any build) publishes them. */
const ENFORCING: KernelSignaturePolicy = {
  kernel: '6.1.0-50-amd64',
  enforcedBy: ['lockdown=integrity', 'Secure Boot'],
  keys: [
    { name: 'Debian Secure Boot CA', id: '6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1' },
    { name: 'Example Corp driver signing', id: '0a1b2c' },
  ],
};
const facts = (f: KernelSignaturePolicy) => ({ [KEYS.kernelSignaturePolicy]: renderKernelSignaturePolicy(f) });

interface SignerCase extends TemplateCase {
  /** What the newest template declares (MODULE_SIGNER_ANNOTATION); default `driver-rollout signing key`; null: nothing. */
  readonly signer?: string | null;
  /** The kernel the node reports running (status.nodeInfo.kernelVersion); default the facts' kernel. */
  readonly running?: string | null;
}

const signerCases: readonly SignerCase[] = [
  {
    name: 'the kernel enforces signatures and trusts no key of the declared signer: not started, not cordoned, the reason names the signer, where each fact comes from and how to enroll',
    node: waiting().annotated(facts(ENFORCING)),
    effects: [],
    reason: 'module-signature-untrusted',
    message: new RegExp(
      '^not started: kernel 6\\.1\\.0-50-amd64: the kernel enforces module signatures \\(lockdown=integrity, Secure Boot\\) and would refuse the gpu driver of the newest template: ' +
        'its modules signed by "driver-rollout signing key", a key not in its trusted keyrings; the keys it trusts: Debian Secure Boot CA, Example Corp driver signing; ' +
        'sign the modules with an enrolled key, or enroll the signing certificate \\(mokutil --import <certificate\\.der>, then confirm it in MokManager at the next boot\\); ' +
        'the signer as the template declares it \\(driver-rollout\\.io/module-signer\\), the kernel as the agent on the node reads it \\(driver-rollout\\.io/gpu-driver\\.kernel-signature-policy\\); ' +
        'starts once the agent on the node reports the key trusted$',
    ),
  },
  {
    name: 'the template declares its modules unsigned: not started',
    node: waiting().annotated(facts(ENFORCING)),
    signer: 'unsigned',
    effects: [],
    reason: 'module-signature-untrusted',
    message: /would refuse the gpu driver of the newest template: its modules unsigned; the keys it trusts: /,
  },
  { name: 'the declared signer is a key the kernel trusts: starts', node: waiting().annotated(facts(ENFORCING)), signer: 'Example Corp driver signing', effects: START, reason: 'waiting-for-driver-pod' },
  { name: 'the kernel does not enforce signatures: starts, unsigned or not', node: waiting().annotated(facts({ ...ENFORCING, enforcedBy: [] })), signer: 'unsigned', effects: START, reason: 'waiting-for-driver-pod' },
  { name: 'no facts (an agent older than them): not judged, starts as before', node: waiting(), effects: START, reason: 'waiting-for-driver-pod' },
  { name: 'the template declares no signer: not judged, starts', node: waiting().annotated(facts(ENFORCING)), signer: null, effects: START, reason: 'waiting-for-driver-pod' },
  {
    name: 'facts read under another kernel than the node reports running (it rebooted since): not judged, starts',
    node: waiting().annotated(facts(ENFORCING)),
    running: '6.1.0-56-amd64',
    effects: START,
    reason: 'waiting-for-driver-pod',
  },
  { name: 'the node does not report its kernel: the facts are judged', node: waiting().annotated(facts(ENFORCING)), running: null, effects: [], reason: 'module-signature-untrusted' },
  {
    name: 'facts that do not parse hold the node, naming the annotation: never read as trusted',
    node: waiting().annotated({ [KEYS.kernelSignaturePolicy]: '{"kernel":"6.1.0-50-amd64"}' }),
    effects: [],
    reason: 'module-signature-untrusted',
    message: /^not started: node\/n1: annotation driver-rollout\.io\/gpu-driver\.kernel-signature-policy is not the agent's kernel signature policy: .*; the agent writes it again at its next start$/,
  },
  {
    name: "the agent's verdict about the new build says trusted: it judged the modules themselves and wins over the declaration",
    node: waiting().annotated({ ...facts(ENFORCING), ...verdict(TRUSTED) }),
    effects: START,
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'a verdict about the old build (trusted) does not release the node: the declaration holds it',
    node: waiting().annotated({ ...facts(ENFORCING), ...verdict({ ...TRUSTED, fingerprint: OLD }) }),
    effects: [],
    reason: 'module-signature-untrusted',
    message: /its modules signed by "driver-rollout signing key"/,
  },
  {
    name: 'restart only (the template loads the driver already loaded): nothing is loaded, so nothing is refused',
    node: aNode('n1').inState('upgrade-done').outdated().annotated({ ...LOADED_OLD, ...facts(ENFORCING) }),
    template: OLD,
    effects: ['state:upgrade-required', 'state:pod-restart-required', 'deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'it takes no slot: the next node, whose kernel trusts any module, starts instead',
    node: waiting().annotated(facts(ENFORCING)),
    policy: { maxParallelUpgrades: 1 },
    others: [aNode('n2').inState('upgrade-required').outdated().annotated(facts({ ...ENFORCING, enforcedBy: [] }))],
    effects: [],
    reason: 'module-signature-untrusted',
  },
];

describe('the Secure Boot start check before any agent of the new build ran: the declared signer against the node\'s own facts', () => {
  it.each(signerCases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    expectPlanned(c, c.signer === undefined ? 'driver-rollout signing key' : c.signer, c.running === undefined ? ENFORCING.kernel : c.running);
  });
});
