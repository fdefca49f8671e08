import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
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
 * The driver is named after the module (vmxnet3: no dependencies, a srcversion, nothing to serve
 * under QEMU); the fixture sysfs's GeForce stands for its device. No API server: the states are the
 * reporter's (run-agent-attempt.ts).
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
  // Everything the guest reads from the host is written before the boot (9p cache=loose).
  await aSysfsTree().with(aGeForce('0000:01:00.0')).writeTo(join(hostDir, 'sys'));
  for (const [name, path] of [['debian', debianModule], ['unsigned', unsigned.modules[0]?.path], ['own-key', ownKey.modules[0]?.path]] as const) {
    if (path === undefined) throw new Error(`no module for ${name}`);
    const dir = join(hostDir, 'prebuilt', name, kernel.version);
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

describe('a kernel that enforces module signatures (module.sig_enforce=1, Debian kernel under QEMU, the whole agent)', () => {
  it('loads a module the kernel trusts, refuses unsigned and own-key modules up front naming the key with nothing unloaded; the kernel itself refuses them', async () => {
    const steps = await runAgentSteps(
      guest,
      'module signatures',
      {
        steps: [
          { kind: 'agent-attempt', env: agentEnv('1.7.0.0-k', 'debian'), timeoutMs: SCENARIO_TIMEOUT_MS },
          { kind: 'agent-attempt', env: agentEnv('2.0.0-own', 'unsigned'), timeoutMs: SCENARIO_TIMEOUT_MS },
          { kind: 'agent-attempt', env: agentEnv('2.0.0-own', 'own-key'), timeoutMs: SCENARIO_TIMEOUT_MS },
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

    // The prediction is the kernel's own: handed to modprobe, the unsigned module is rejected.
    const unchecked = stepAt(steps, 4);
    expect(unchecked.error?.name).toBe('ModuleLoadError');
    expect(unchecked.error?.message).toContain('Key was rejected by service');
    expect(unchecked.after[MODULE]).toBeNull();
    console.info(`kernel tests: module signatures: the agent's refusals:\n${refusedUnsigned.agentState?.message ?? ''}\n${refusedOwnKey.agentState?.message ?? ''}\nthe kernel's: ${unchecked.error?.message ?? ''}`);
  }, SCENARIO_TIMEOUT_MS + 60_000);
});

/** Debian's module ran throughout the refused attempt, and the kernel logged no load or unload. */
function expectNothingUnloaded(refused: StepReport, srcversion: string | undefined): void {
  expect(refused.after[MODULE]?.srcversion).toBe(srcversion);
  expect(refused.kernelLog.filter((l) => /vmxnet3|module verification|Key was rejected/i.test(l))).toEqual([]);
}

/** Hex digits as one number: DER may pad a serial with a zero byte that openssl does not print. */
function withoutLeadingZeros(hex: string): string {
  return hex.toUpperCase().replace(/^0+/, '');
}
