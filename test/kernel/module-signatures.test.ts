import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';
import { aGeForce, aSysfsTree } from '../fixtures/sysfs/sysfs-tree.ts';
import { buildSampleDriver } from '../unit/agent/build/sample-driver.ts';
import type { StepReport } from './guest/scenario.ts';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { defaultCacheDir } from './harness/build-initramfs.ts';
import { findTestKernel } from './harness/find-test-kernel.ts';
import { runAgentSteps, stepAt } from './harness/run-agent-steps.ts';
import { GUEST_NODE_COMPILE_CACHE } from './harness/run-guest-scenario.ts';
import { GUEST_AGENT_ENV } from './harness/guest-agent-env.ts';
import { nvidiaTestKernel } from '../vendor-drivers/ensure-vendor-builds.ts';
import { NEXT_KERNEL_MODULES_REFUSED_EVENT, NEXT_KERNEL_READY_EVENT } from '../../agent/report/node-events.ts';
import { driverKeys } from '../../shared/keys.ts';
import { toLabelValue } from '../../agent/report/node-labels.ts';

/*
 * Secure Boot's module signature check (issue 33), on Debian's kernel under QEMU booted with
 * `module.sig_enforce=1`: the whole agent (assembleAgent, real kernel adapter) reads the kernel's
 * policy and keys (/sys/module/module/parameters/sig_enforce, /proc/keys) and refuses, before
 * anything is unloaded, modules the kernel would refuse: unsigned ones and ones signed with a key
 * of the agent's own (made here with openssl, signed by the agent's build with the headers'
 * sign-file), naming the key. A module the kernel trusts passes: Debian's in-tree vmxnet3.ko,
 * signed by the kernel's build key, handed over as an image's prebuilt module. The last step shows
 * the prediction is the kernel's: the same unsigned module, loaded by reloadDriver without the check
 * after the old one was unloaded, is refused by the kernel itself.
 *
 * The next-kernel preflight judges the same way before a reboot: a next kernel is on the guest's
 * disk (the host's installed headers of Debian's linux-image-6.1.0-50-amd64, the kernel test's
 * other kernel, whose package scripts/ensure-vendor-packages.sh unpacks), and the image carries
 * modules for it too: the own build unsigned, the own build signed with the agent's key, and
 * Debian's own vmxnet3.ko of that kernel. One pass of the agent's preflight (its own wiring,
 * nextKernelPreflightDeps) under the running kernel's policy reports the first two refused
 * (`next-kernel=failed`, NextKernelModulesRefused naming the key) and Debian's ready, with nothing
 * loaded or unloaded. Debian's module of that kernel is signed by that kernel's own build key,
 * which the running kernel does not hold; it passes by the key's name (the same as the running
 * kernel's build key), the documented limit of matching a module's certificate serial against
 * /proc/keys, and the right answer here: the next kernel trusts its own build key.
 *
 * The driver is named after the module (vmxnet3: no dependencies, a srcversion, nothing to serve
 * under QEMU); the fixture sysfs's GeForce stands for its device. No API server: the states are the
 * reporter's (run-agent-attempt.ts), the preflight's labels and Events as it wrote them
 * (run-next-kernel-pass.ts).
 */

const MODULE = 'vmxnet3';
const OWN_BUILD = join(import.meta.dirname, 'fixtures', 'own-build-vmxnet3');
const OWN_KEY_NAME = 'driver-rollout kernel test signing key';
const STATE = '/var/lib/driver-rollout';
/** Only catches a hang: the whole agent's first attempt took minutes in the guest at load average 26. */
const SCENARIO_TIMEOUT_MS = 1_500_000;

let guest: Guest;
let hostDir: string;
let unsigned: BuiltDriver;
let ownKey: BuiltDriver;
let debianModule: string;
let ownKeySerial: string;
/** The other kernel on the guest's disk, whose build the preflight judges. */
let nextKernel: string;

beforeAll(async () => {
  const started = performance.now();
  const kernel = await findTestKernel();
  hostDir = await mkdtemp(join(tmpdir(), 'driver-rollout-signatures-'));
  const key = join(hostDir, 'signing.key');
  const cert = join(hostDir, 'signing.crt');
  await execa('openssl', ['req', '-new', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${OWN_KEY_NAME}`, '-keyout', key, '-out', cert]);
  ownKeySerial = (await execa('openssl', ['x509', '-in', cert, '-noout', '-serial'])).stdout.replace(/^serial=/, '');
  const cacheDir = join(defaultCacheDir(), 'kernel-test-modules');
  const own = { driver: MODULE, source: { kind: 'directory', path: OWN_BUILD } as const, generatedFiles: {} };
  unsigned = await buildSampleDriver('2.0.0-own', cacheDir, own);
  // The signing certificate is part of the cache key: a fresh key is a fresh build.
  ownKey = await buildSampleDriver('2.0.0-own', join(hostDir, 'cache'), { ...own, signing: { privateKeyPath: key, certificatePath: cert } });
  debianModule = join(kernel.modulesDir, 'kernel', 'drivers', 'net', 'vmxnet3', 'vmxnet3.ko');
  // The next kernel: its headers are installed, its package unpacked (Debian's own modules).
  const next = await nvidiaTestKernel();
  nextKernel = next.release;
  if (nextKernel === kernel.version) throw new Error(`the next kernel ${nextKernel} is the booted one: the preflight needs another`);
  const nextUnsigned = await buildSampleDriver('2.0.0-own', cacheDir, { ...own, kernelVersion: nextKernel });
  const nextOwnKey = await buildSampleDriver('2.0.0-own', join(hostDir, 'cache'), { ...own, kernelVersion: nextKernel, signing: { privateKeyPath: key, certificatePath: cert } });
  const nextDebian = join(next.root, 'lib', 'modules', nextKernel, 'kernel', 'drivers', 'net', 'vmxnet3', 'vmxnet3.ko');
  // The preflight's headers dirs name that kernel only (the host may have headers of more).
  await mkdir(join(hostDir, 'headers'));
  await symlink(`/usr/src/linux-headers-${nextKernel}`, join(hostDir, 'headers', `linux-headers-${nextKernel}`));
  // Everything the guest reads from the host is written before the boot (9p cache=loose).
  await aSysfsTree().with(aGeForce('0000:01:00.0')).writeTo(join(hostDir, 'sys'));
  const prebuilt = [
    ['debian', kernel.version, debianModule],
    ['unsigned', kernel.version, unsigned.modules[0]?.path],
    ['own-key', kernel.version, ownKey.modules[0]?.path],
    ['debian', nextKernel, nextDebian],
    ['unsigned', nextKernel, nextUnsigned.modules[0]?.path],
    ['own-key', nextKernel, nextOwnKey.modules[0]?.path],
  ] as const;
  for (const [name, release, path] of prebuilt) {
    if (path === undefined) throw new Error(`no module for ${name} (${release})`);
    const dir = join(hostDir, 'prebuilt', name, release);
    await mkdir(dir, { recursive: true });
    await copyFile(path, join(dir, `${MODULE}.ko`));
    await writeFile(join(dir, 'modules.order'), `${MODULE}.ko\n`);
  }
  guest = await bootGuest({ kernel, kernelParameters: ['module.sig_enforce=1'], writableDirs: [GUEST_NODE_COMPILE_CACHE], bootTimeoutMs: 300_000 });
  console.info(`kernel tests (module signatures): ${guest.kernel.version} booted with module.sig_enforce=1 in ${Math.round(guest.bootMs)} ms; ready after ${Math.round(performance.now() - started)} ms`);
}, 900_000);

afterAll(async () => {
  await (guest as Guest | undefined)?.stop();
  if ((hostDir as string | undefined) !== undefined) await rm(hostDir, { recursive: true, force: true });
});

function agentEnv(version: string, prebuilt: 'debian' | 'unsigned' | 'own-key'): Record<string, string> {
  return {
    NODE_NAME: 'guest',
    POD_NAME: `${MODULE}-driver-guest`,
    POD_NAMESPACE: 'driver-rollout',
    DRIVER_NAME: MODULE,
    DRIVER_VERSION: version,
    DRIVER_SOURCE_DIR: OWN_BUILD,
    PREBUILT_MODULES_DIR: join(hostDir, 'prebuilt', prebuilt),
    DEVICE_KIND: 'gpu',
    SYSFS_ROOT: join(hostDir, 'sys'),
    MODULE_ROOT: `${STATE}/${MODULE}/root`,
    CACHE_DIR: `${STATE}/cache`,
    NEXT_KERNEL_PREFLIGHT: 'false',
    ...GUEST_AGENT_ENV,
  };
}

/** The agent's settings for its next-kernel preflight: the image's modules `prebuilt`, the next kernel's headers only. */
function preflightEnv(prebuilt: 'debian' | 'unsigned' | 'own-key'): Record<string, string> {
  return { ...agentEnv('2.0.0-own', prebuilt), HEADERS_DIRS: join(hostDir, 'headers', 'linux-headers-{kernel}'), CACHE_DIR: `${STATE}/preflight-cache-${prebuilt}` };
}

describe('a kernel that enforces module signatures (module.sig_enforce=1, Debian kernel under QEMU, the whole agent)', () => {
  it('loads a module the kernel trusts, refuses unsigned and own-key modules up front naming the key with nothing unloaded, and says the same of a next kernel before a reboot; the kernel itself refuses them', async () => {
    const steps = await runAgentSteps(
      guest,
      'module signatures',
      {
        steps: [
          { kind: 'agent-attempt', env: agentEnv('1.7.0.0-k', 'debian'), timeoutMs: SCENARIO_TIMEOUT_MS },
          { kind: 'agent-attempt', env: agentEnv('2.0.0-own', 'unsigned'), timeoutMs: SCENARIO_TIMEOUT_MS },
          { kind: 'agent-attempt', env: agentEnv('2.0.0-own', 'own-key'), timeoutMs: SCENARIO_TIMEOUT_MS },
          // The next-kernel preflight, one pass per image, Debian's module still loaded.
          { kind: 'next-kernel-pass', env: preflightEnv('unsigned') },
          { kind: 'next-kernel-pass', env: preflightEnv('own-key') },
          { kind: 'next-kernel-pass', env: preflightEnv('debian') },
          // Without the check: the old module unloaded, the unsigned one handed to modprobe.
          { kind: 'unload-module', module: MODULE },
          { kind: 'reload', built: unsigned, tree: { root: `${STATE}/unchecked/root`, kernelVersion: guest.kernel.version, configDir: '/run/modprobe.d' }, parameters: {} },
        ],
        watch: [MODULE],
      },
      { expectedErrors: ['ModuleLoadError'], timeoutMs: SCENARIO_TIMEOUT_MS },
    );
    const debian = stepAt(steps, 0);
    expect(debian.agentState).toMatchObject({ phase: 'Loaded', driverVersion: '1.7.0.0-k' });
    const debianSrcversion = debian.after[MODULE]?.srcversion;
    expect(debianSrcversion).toBeDefined();

    const refusedUnsigned = stepAt(steps, 1);
    expect(refusedUnsigned.agentState).toMatchObject({ phase: 'Failed', reason: 'ModuleSignatureUntrusted' });
    expect(refusedUnsigned.agentState?.message).toContain('the kernel enforces module signatures (module.sig_enforce) and would refuse vmxnet3: vmxnet3 unsigned');
    expect(refusedUnsigned.agentState?.message).toContain('the keys it trusts: Build time autogenerated kernel key;');
    expect(refusedUnsigned.agentState?.message).toContain('mokutil --import');
    expect(refusedUnsigned.agentState?.message).toContain('nothing was unloaded');

    const refusedOwnKey = stepAt(steps, 2);
    expect(refusedOwnKey.agentState).toMatchObject({ phase: 'Failed', reason: 'ModuleSignatureUntrusted' });
    expect(refusedOwnKey.agentState?.message).toContain(`vmxnet3 signed by "${OWN_KEY_NAME}" (key `);
    // The key named is the certificate's serial number (modinfo's sig_key), as `mokutil --list-enrolled` would show it.
    const named = /\(key ([0-9A-F:]+)\)/.exec(refusedOwnKey.agentState?.message ?? '')?.[1] ?? '';
    expect(withoutLeadingZeros(named.replaceAll(':', ''))).toBe(withoutLeadingZeros(ownKeySerial));

    for (const refused of [refusedUnsigned, refusedOwnKey]) expectNothingUnloaded(refused, debianSrcversion);

    // Before a reboot into the next kernel: the same verdicts, from the preflight, with the same words.
    const [nextUnsigned, nextOwnKey, nextDebian] = [stepAt(steps, 3), stepAt(steps, 4), stepAt(steps, 5)];
    expectNextKernelRefused(nextUnsigned, 'vmxnet3 unsigned');
    expectNextKernelRefused(nextOwnKey, `vmxnet3 signed by "${OWN_KEY_NAME}" (key ${named}), a key not in its trusted keyrings`);
    expectNextKernelReady(nextDebian);
    for (const pass of [nextUnsigned, nextOwnKey, nextDebian]) expectNothingUnloaded(pass, debianSrcversion);

    // The prediction is the kernel's own: handed to modprobe, the unsigned module is rejected.
    const unchecked = stepAt(steps, 7);
    expect(unchecked.error?.name).toBe('ModuleLoadError');
    expect(unchecked.error?.message).toContain('Key was rejected by service');
    expect(unchecked.after[MODULE]).toBeNull();
    const said = (reports: readonly StepReport[]): string => reports.map(saidBy).join('\n');
    console.info(`kernel tests: module signatures: the agent's refusals:\n${said([refusedUnsigned, refusedOwnKey])}\nthe next-kernel preflight's (${nextKernel}):\n${said([nextUnsigned, nextOwnKey])}\nthe kernel's: ${saidBy(unchecked)}`);
  }, SCENARIO_TIMEOUT_MS + 60_000);
});

const KEYS = driverKeys(MODULE);

/** One preflight pass that judged the next kernel's build refused: `refused` in its result, the failed labels, one Warning. */
function expectNextKernelRefused(pass: StepReport, refused: string): void {
  expect(pass.nextKernel?.runningKernel).toBe(guest.kernel.version);
  expect(pass.nextKernel?.results).toEqual([expect.objectContaining({ kernel: nextKernel, outcome: 'failed', reason: 'ModuleSignatureUntrusted' })]);
  const firstError = pass.nextKernel?.results[0]?.outcome === 'failed' ? pass.nextKernel.results[0].firstError : '';
  expect(firstError).toContain(`the kernel enforces module signatures (module.sig_enforce) and would refuse vmxnet3: ${refused}; the keys it trusts: `);
  expect(firstError).toContain('mokutil --import');
  expect(pass.nextKernel?.labels).toEqual([{ [KEYS.nextKernel]: 'failed', [KEYS.nextKernelFailed]: toLabelValue(nextKernel) }]);
  expect(pass.nextKernel?.events).toHaveLength(1);
  expect(pass.nextKernel?.events[0]).toMatchObject({ type: 'Warning', reason: NEXT_KERNEL_MODULES_REFUSED_EVENT });
  expect(pass.nextKernel?.events[0]?.message).toContain(`builds for kernel ${nextKernel} (installed, not running), and a reboot into it would leave the node without the driver: ${firstError}`);
}

/** One preflight pass that judged the next kernel's build trusted: ready, its labels, one Normal Event. */
function expectNextKernelReady(pass: StepReport): void {
  expect(pass.nextKernel?.results).toEqual([expect.objectContaining({ kernel: nextKernel, outcome: 'ready' })]);
  expect(pass.nextKernel?.labels).toEqual([{ [KEYS.nextKernel]: 'ready', [KEYS.nextKernelFailed]: null }]);
  expect(pass.nextKernel?.events).toEqual([expect.objectContaining({ type: 'Normal', reason: NEXT_KERNEL_READY_EVENT })]);
}

/** What a step said: the agent's state message, the preflight's Event, or the error. */
function saidBy(step: StepReport): string {
  return step.agentState?.message ?? step.nextKernel?.events[0]?.message ?? step.error?.message ?? '';
}

/** Debian's module ran throughout the refused attempt, and the kernel logged no load or unload. */
function expectNothingUnloaded(refused: StepReport, srcversion: string | undefined): void {
  expect(refused.after[MODULE]?.srcversion).toBe(srcversion);
  expect(refused.kernelLog.filter((l) => /vmxnet3|module verification|Key was rejected/i.test(l))).toEqual([]);
}

/** Hex digits as one number: DER may pad a serial with a zero byte that openssl does not print. */
function withoutLeadingZeros(hex: string): string {
  return hex.toUpperCase().replace(/^0+/, '');
}
