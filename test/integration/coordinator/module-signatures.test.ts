import type { V1Container, V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { driverFingerprint, driverIdentityFromSettings } from '../../../shared/driver-identity.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { renderSignatureVerdict, type SignatureVerdict } from '../../../shared/module-signature-verdict.ts';
import { renderKernelSignaturePolicy, type KernelSignaturePolicy } from '../../../shared/kernel-signature-policy.ts';
import { MODULE_SIGNER_ANNOTATION } from '../../../shared/keys.ts';
import { isPodReady, useRolloutWorlds, type RolloutWorld } from './harness.ts';

// The Secure Boot start check (issue 33) on the real control plane (KWOK driver pods, the
// coordinator in this process): the agent's verdict is planted on the node as the agent writes it
// (driver-rollout.io/<driver>-driver.module-signatures); the template's agent container says which
// driver it loads (DRIVER_VERSION), so the coordinator knows the identity the verdict must be about.
// A refusal of the build running now does not hold the next one; a refusal of the new driver holds
// the node uncordoned with a reason naming the key and mokutil, and the node starts once the
// verdict says trusted.
// Before any agent of the new build has run (the first node of a kernel that refuses it): the
// node's own facts, as the agent running there publishes them whatever its build
// (driver-rollout.io/<driver>-driver.kernel-signature-policy), against the signer the new
// template declares (driver-rollout.io/module-signer): the node is never cordoned.

const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;

const agent = (image: string, version: string): V1Container => ({ name: 'driver', image, env: [{ name: 'DRIVER_VERSION', value: version }] });
/** The identity the coordinator reads from that container's environment. */
const fingerprintOf = (version: string): string => {
  const identity = driverIdentityFromSettings((setting) => (setting === 'version' ? version : undefined));
  if (identity === null) throw new Error(`no identity for ${version}`);
  return driverFingerprint(identity);
};
const refusal = (version: string): SignatureVerdict => ({
  fingerprint: fingerprintOf(version),
  kernel: '6.1.0-50-amd64',
  enforcedBy: ['module.sig_enforce'],
  untrusted: [{ module: 'drsample_core', signedBy: '"driver-rollout signing key" (key 5E:77:01)' }],
  trustedKeys: ['Debian Secure Boot CA'],
});

const annotation = (n: V1Node | undefined, key: string): string | undefined => n?.metadata?.annotations?.[key];

async function publish(world: RolloutWorld, node: string, verdict: SignatureVerdict): Promise<void> {
  await world.core.patchNode({ name: node, body: { metadata: { annotations: { [world.keys.moduleSignatures]: renderSignatureVerdict(verdict) } } } }, MERGE_PATCH);
}

async function rollTo(world: RolloutWorld, image: string, version: string): Promise<void> {
  await world.apps.patchNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: { spec: { template: { spec: { containers: [agent(image, version)] } } } } }, MERGE_PATCH);
}

describe('Secure Boot: a node whose kernel would refuse the new modules, real control plane', () => {
  it('is held naming the key and how to enroll it, uncordoned, and starts once the verdict says trusted; a refusal of the running build holds nothing', { timeout: 600_000 }, async () => {
    const world = worlds.create('sigs');
    await world.setUp([{}]);
    const node = world.nodeNames[0] ?? '';
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: world.daemonSetWith({ containers: [agent('driver:v1', '1.0.0')] }) });
    await world.waitForDriverPods((pods) => pods.length === 1 && pods.every(isPodReady));
    await world.createRollout({});
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });

    // The agent of 1.0.0 says its kernel would refuse 1.0.0: nothing about 2.0.0, which rolls out.
    await publish(world, node, refusal('1.0.0'));
    await rollTo(world, 'driver:v2', '2.0.0');
    // With OnDelete the pod is at 2.0.0 only once the coordinator restarted it.
    await world.waitForDriverPods((pods) => pods.length === 1 && pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === 'driver:v2'), HANG_MS);
    const [upgraded] = await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    expect(upgraded?.spec?.unschedulable).not.toBe(true);

    // An agent of 3.0.0 has run there and found the key untrusted (a refused pod, retried): 3.0.0 does not start.
    await publish(world, node, refusal('3.0.0'));
    await rollTo(world, 'driver:v3', '3.0.0');
    const expected =
      `not started: kernel 6.1.0-50-amd64: the kernel enforces module signatures (module.sig_enforce) and would refuse the ${world.driver} driver of the newest template: ` +
      'drsample_core signed by "driver-rollout signing key" (key 5E:77:01), a key not in its trusted keyrings; the keys it trusts: Debian Secure Boot CA; ' +
      'sign the modules with an enrolled key, or enroll the signing certificate (mokutil --import <certificate.der>, then confirm it in MokManager at the next boot); ' +
      'starts once the agent on the node reports them trusted';
    let seen = '';
    const held = await world.waitForNodes('the node held for its kernel', (nodes) => {
      const n = nodes.find((x) => x.metadata?.name === node);
      seen = `${world.stateOf(n ?? {})}: ${annotation(n, world.keys.upgradeReason) ?? '(no reason)'}`;
      return world.stateOf(n ?? {}) === 'upgrade-required' && annotation(n, world.keys.upgradeReason) === expected ? n : undefined;
    }, HANG_MS).catch((error: unknown) => {
      throw new Error(`the node was last seen ${seen}`, { cause: error });
    });
    expect(held.spec?.unschedulable).not.toBe(true);
    expect(annotation(held, world.keys.upgradeStartTime)).toBeUndefined();
    const status = await world.waitForStatus('the node waiting for its kernel', (s) => JSON.stringify(s.waiting ?? []).includes('mokutil --import'), HANG_MS);
    expect(status.waiting).toEqual([{ node, state: 'upgrade-required', reason: expected }]);
    expect((await world.driverPods()).map((p) => p.spec?.containers[0]?.image)).toEqual(['driver:v2']);

    // The key enrolled (the node rebooted, its agent judged again): trusted.
    await publish(world, node, { ...refusal('3.0.0'), untrusted: [], trustedKeys: ['Debian Secure Boot CA', 'driver-rollout signing key'] });
    await world.waitForDriverPods((pods) => pods.length === 1 && pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === 'driver:v3'), HANG_MS);
    await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
  });
});

/** The node's own facts as the agent running there (any build) publishes them, under the kernel the node reports; returns that kernel. */
async function publishFacts(world: RolloutWorld, node: string, facts: Omit<KernelSignaturePolicy, 'kernel'>): Promise<string> {
  const reported = (await world.core.readNode({ name: node })).status?.nodeInfo?.kernelVersion ?? '';
  const kernel = reported === '' ? '6.1.0-56-amd64' : reported;
  await world.core.patchNode({ name: node, body: { metadata: { annotations: { [world.keys.kernelSignaturePolicy]: renderKernelSignaturePolicy({ kernel, ...facts }) } } } }, MERGE_PATCH);
  return kernel;
}

const SECURE_BOOT = { enforcedBy: ['lockdown=integrity', 'Secure Boot'], keys: [{ name: 'Debian Secure Boot CA', id: '6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1' }] };

describe('Secure Boot before any agent of the new build ran: the declared signer against the node\'s own facts, real control plane', () => {
  it('never cordons the first node of a kernel that would refuse the new signer, upgrades the node that enforces nothing, and starts the held node once its key is enrolled', { timeout: 600_000 }, async () => {
    const world = worlds.create('signer');
    await world.setUp([{}, {}]);
    const [secureBoot = '', lax = ''] = world.nodeNames;
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: world.daemonSetWith({ containers: [agent('driver:v1', '1.0.0')] }) });
    await world.waitForDriverPods((pods) => pods.length === 2 && pods.every(isPodReady));
    await world.createRollout({ upgradePolicy: { maxParallelUpgrades: 2 } });
    await world.startCoordinator();
    await world.waitForStates({ [secureBoot]: 'upgrade-done', [lax]: 'upgrade-done' });

    // The agents of 1.0.0 say what their kernels are: no verdict about 2.0.0 exists anywhere.
    const kernel = await publishFacts(world, secureBoot, SECURE_BOOT);
    await publishFacts(world, lax, { enforcedBy: [], keys: [] });
    const cordoned = await world.watchNodes((nodes) => (nodes.get(secureBoot)?.spec?.unschedulable === true ? `${secureBoot} cordoned` : undefined));
    await world.apps.patchNamespacedDaemonSet(
      {
        name: 'driver',
        namespace: world.ns.name,
        body: { spec: { template: { metadata: { annotations: { [MODULE_SIGNER_ANNOTATION]: 'driver-rollout signing key' } }, spec: { containers: [agent('driver:v2', '2.0.0')] } } } },
      },
      MERGE_PATCH,
    );

    const expected =
      `not started: kernel ${kernel}: ` +
      `the kernel enforces module signatures (lockdown=integrity, Secure Boot) and would refuse the ${world.driver} driver of the newest template: ` +
      'its modules signed by "driver-rollout signing key", a key not in its trusted keyrings; the keys it trusts: Debian Secure Boot CA; ' +
      'sign the modules with an enrolled key, or enroll the signing certificate (mokutil --import <certificate.der>, then confirm it in MokManager at the next boot); ' +
      `the signer as the template declares it (${MODULE_SIGNER_ANNOTATION}), the kernel as the agent on the node reads it (${world.keys.kernelSignaturePolicy}); ` +
      'starts once the agent on the node reports the key trusted';
    // The node that enforces nothing upgrades; the Secure Boot node waits, uncordoned, with its reason.
    let seen = '';
    const held = await world.waitForNodes('the lax node upgraded and the Secure Boot node held', (nodes) => {
      const n = nodes.find((x) => x.metadata?.name === secureBoot);
      const other = nodes.find((x) => x.metadata?.name === lax);
      seen = `${secureBoot} ${world.stateOf(n ?? {})}: ${annotation(n, world.keys.upgradeReason) ?? '(no reason)'}; ${lax} ${world.stateOf(other ?? {})}`;
      return world.stateOf(n ?? {}) === 'upgrade-required' && annotation(n, world.keys.upgradeReason) === expected && world.stateOf(other ?? {}) === 'upgrade-done' ? n : undefined;
    }, HANG_MS).catch((error: unknown) => {
      throw new Error(`last seen: ${seen}`, { cause: error });
    });
    const onLax = (await world.driverPods()).filter((p) => p.spec?.nodeName === lax);
    expect(onLax.map((p) => [p.spec?.containers[0]?.image, isPodReady(p)])).toEqual([['driver:v2', true]]);
    expect(annotation(held, world.keys.upgradeStartTime)).toBeUndefined();
    // The status trails the nodes by a pass: the one written once the lax node is done.
    const onlySecureBoot = (s: Record<string, unknown>): boolean => Array.isArray(s.waiting) && s.waiting.length === 1;
    const status = await world.waitForStatus('only the Secure Boot node waiting', onlySecureBoot, HANG_MS);
    expect(status.waiting).toEqual([{ node: secureBoot, state: 'upgrade-required', reason: expected }]);
    expect((await world.driverPods()).filter((p) => p.spec?.nodeName === secureBoot).map((p) => p.spec?.containers[0]?.image)).toEqual(['driver:v1']);
    // Not cordoned at any moment, not only now.
    expect(cordoned.violations).toEqual([]);

    // The key enrolled (the node rebooted into MokManager and back; its agent read the keyrings again): it starts.
    await publishFacts(world, secureBoot, { ...SECURE_BOOT, keys: [...SECURE_BOOT.keys, { name: 'driver-rollout signing key', id: '5e7701' }] });
    cordoned.stop();
    await world.waitForDriverPods((pods) => pods.length === 2 && pods.every((p) => isPodReady(p) && p.spec?.containers[0]?.image === 'driver:v2'), HANG_MS);
    await world.waitForStates({ [secureBoot]: 'upgrade-done', [lax]: 'upgrade-done' }, HANG_MS);
  });
});
