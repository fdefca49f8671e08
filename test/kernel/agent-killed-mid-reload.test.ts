import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuiltDriver } from '../../agent/build/built-driver.ts';
import { PARTIAL_FIRMWARE_SUFFIX, PATH_BEFORE_FILE } from '../../agent/kernel/driver-firmware.ts';
import type { DriverState } from '../../agent/report/driver-state.ts';
import { aGeForce, aSysfsTree } from '../fixtures/sysfs/sysfs-tree.ts';
import { buildSampleDriver, SAMPLE_DRIVER_DIR } from '../unit/agent/build/sample-driver.ts';
import type { PausePoint } from './guest/pausing-kernel.ts';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { defaultCacheDir } from './harness/build-initramfs.ts';
import { runAgentUntilKilled, type AgentKill } from './harness/kill-agent.ts';
import { runAgentSteps, stepAt } from './harness/run-agent-steps.ts';
import { GUEST_NODE_COMPILE_CACHE } from './harness/run-guest-scenario.ts';
import { GUEST_AGENT_ENV } from './harness/guest-agent-env.ts';

/*
 * An agent killed mid-reload (issue 33), on Debian's kernel under QEMU. One node (one lock,
 * module root, modprobe.d, cache with the last good record, firmware dir) goes through a chain of
 * reloads between the sample driver's 1.0.0 and 2.0.0; each is killed with SIGKILL at one step,
 * then a new agent starts on what it left, as the kubelet restarts the container. Every time the
 * new agent must end with the target driver loaded and verified, or with the last good one loaded
 * and a reason; never a half-loaded set (both modules of one version, or none), a leaked blacklist
 * or a stale firmware path.
 *
 * - The killed agent is a process of its own (guest/run-killable-agent.ts): the agent's steps as
 *   its loop runs them (node lock, detect, build, load through reloadDriver; configured by the
 *   DaemonSet's environment) on the real kernel adapter wrapped by a test-side pause
 *   (guest/pausing-kernel.ts: it stops for good at a modprobe call of the driver's tree). The
 *   firmware copy does not go through the kernel port: there a watcher in the guest kills the agent
 *   as soon as the new firmware's directory appears in the host dir, while 2 x 48 MiB are copied,
 *   and the test checks the kill landed mid-copy.
 * - The new agent is the whole agent (assembleAgent, run-agent-attempt.ts), a fresh instance in the
 *   guest's long-lived scenario process: starting Node and the agent's imports costs minutes under
 *   emulation on the loaded shared machine. It takes over the dead agent's lock (stale after 15 s).
 *
 * Modules reach the agent as an image's prebuilt ones (PREBUILT_MODULES_DIR, built here by
 * buildDriver before the boot); the fixture sysfs shows a GeForce, so detection finds a device. No
 * API server: states are the reporter's (run-agent-attempt.ts).
 */

const CORE = 'drsample_core';
const NET = 'drsample_net';
const DRIVER = 'drsample';
const BLACKLIST_FILE = `driver-rollout-${DRIVER}-blacklist.conf`;
const CLASS_PATH = '/sys/module/firmware_class/parameters/path';
const NODE = '/var/lib/driver-rollout-kill-test';
const FIRMWARE_HOST = `${NODE}/firmware`;
const MODPROBE_D = `${NODE}/modprobe.d`;
/** Over the 1024 bytes the kernel takes for a charp parameter: init_module fails (ENOSPC), after the unload. */
const TOO_LONG_GREETING = 'x'.repeat(1100);
/** Only catches a hang: at load average 26 starting Node and the agent's steps took 5 minutes in the guest. */
const AGENT_TIMEOUT_MS = 900_000;
const BIG_FIRMWARE_DIR = `${DRIVER}-big`;
const BIG_FIRMWARE = ['blob-1.bin', 'blob-2.bin'];

type Version = '1.0.0' | '2.0.0';
type Kill = { readonly kind: 'pause'; readonly at: PausePoint } | { readonly kind: 'firmware-copy' };

interface KillCase {
  readonly step: string;
  readonly kill: Kill;
  /** The reload goes from the other version to this one. */
  readonly target: Version;
  /** The target is configured to fail its load (a parameter the kernel refuses). */
  readonly targetFails: boolean;
  /** What the new agent must end with. */
  readonly converges: { readonly phase: DriverState['phase']; readonly reason: string; readonly version: Version };
}

const to = (version: Version) => ({ phase: 'Loaded', reason: 'Loaded', version }) as const;

/** The steps of a reload, in the order the chain runs them; each starts from the one before's end. */
const CASES: readonly KillCase[] = [
  { step: 'after the old modules are unloaded', kill: { kind: 'pause', at: { when: 'before', modprobe: 1 } }, target: '2.0.0', targetFails: false, converges: to('2.0.0') },
  { step: 'between two modprobe calls of the load', kill: { kind: 'pause', at: { when: 'before', modprobe: 2 } }, target: '1.0.0', targetFails: false, converges: to('1.0.0') },
  { step: 'after the load, before the readiness report', kill: { kind: 'pause', at: { when: 'after', modprobe: 2 } }, target: '2.0.0', targetFails: false, converges: to('2.0.0') },
  { step: 'during the firmware copy', kill: { kind: 'firmware-copy' }, target: '1.0.0', targetFails: false, converges: to('1.0.0') },
  {
    step: 'after the old modules are unloaded, the new driver failing to load',
    kill: { kind: 'pause', at: { when: 'before', modprobe: 1 } },
    target: '2.0.0',
    targetFails: true,
    converges: { phase: 'Failed', reason: 'LoadFailedRolledBack', version: '1.0.0' },
  },
];

/** What the node looks like: /sys/module, the modprobe.d dir, the firmware path and dir. */
interface NodeLook {
  readonly loaded: Readonly<Record<string, string | null>>;
  readonly modprobeD: readonly string[];
  readonly firmwarePath: string;
  /** Files in the firmware host dir: `name` (same bytes as in a source), `name (truncated)`, or a partial copy's name. */
  readonly firmware: readonly string[];
}

let guest: Guest;
let hostDir: string;
const built: Partial<Record<Version, BuiltDriver>> = {};
const table: string[] = [];

beforeAll(async () => {
  const started = performance.now();
  const cacheDir = join(defaultCacheDir(), 'kernel-test-modules');
  built['1.0.0'] = await buildSampleDriver('1.0.0', cacheDir);
  built['2.0.0'] = await buildSampleDriver('2.0.0', cacheDir);
  // Everything the guest reads from the host is written before the boot (9p cache=loose).
  hostDir = await mkdtemp(join(tmpdir(), 'driver-rollout-kill-'));
  await aSysfsTree().with(aGeForce('0000:01:00.0')).writeTo(join(hostDir, 'sys'));
  for (const version of ['1.0.0', '2.0.0'] as const) {
    const dir = join(hostDir, 'prebuilt', version, sample(version).kernelVersion);
    await mkdir(dir, { recursive: true });
    for (const m of sample(version).modules) await copyFile(m.path, join(dir, `${m.name}.ko`));
    await writeFile(join(dir, 'modules.order'), sample(version).modules.map((m) => `${m.name}.ko`).join('\n') + '\n');
    for (const source of [version, `${version}-big`]) {
      await mkdir(join(hostDir, 'firmware', source, `${DRIVER}-${version}`), { recursive: true });
      await writeFile(join(hostDir, 'firmware', source, `${DRIVER}-${version}`, 'fw.bin'), `firmware ${version}\n`);
    }
    await mkdir(join(hostDir, 'firmware', `${version}-big`, BIG_FIRMWARE_DIR), { recursive: true });
    for (const name of BIG_FIRMWARE) await execa('head', ['-c', String(48 << 20), '/dev/urandom'], { stdout: { file: join(hostDir, 'firmware', `${version}-big`, BIG_FIRMWARE_DIR, name) } });
  }
  guest = await bootGuest({ writableDirs: [GUEST_NODE_COMPILE_CACHE], bootTimeoutMs: 300_000 });
  console.info(`kernel tests (agent killed mid-reload): ${guest.kernel.version} booted in ${Math.round(guest.bootMs)} ms; ready after ${Math.round(performance.now() - started)} ms`);
}, 600_000);

afterAll(async () => {
  await (guest as Guest | undefined)?.stop();
  if ((hostDir as string | undefined) !== undefined) await rm(hostDir, { recursive: true, force: true });
  if (table.length > 0) console.info(['kernel tests: agent killed mid-reload', '| killed | the kill left | the new agent | the node after it |', '|---|---|---|---|', ...table].join('\n'));
});

function sample(version: Version): BuiltDriver {
  const found = built[version];
  if (found === undefined) throw new Error(`sample driver ${version} not built`);
  return found;
}

/** The DaemonSet's settings for one version, pointed at this node's paths. */
function agentEnv(version: Version, options: { readonly bigFirmware?: boolean; readonly failingLoad?: boolean } = {}): Record<string, string> {
  return {
    NODE_NAME: 'guest',
    POD_NAME: `${DRIVER}-driver-guest`,
    POD_NAMESPACE: 'driver-rollout',
    DRIVER_NAME: DRIVER,
    DRIVER_VERSION: version,
    DRIVER_SOURCE_DIR: SAMPLE_DRIVER_DIR,
    PREBUILT_MODULES_DIR: join(hostDir, 'prebuilt', version),
    DEVICE_KIND: 'gpu',
    MODULE_BLACKLIST: 'nouveau',
    ...(options.failingLoad === true ? { MODULE_PARAMETERS: `${CORE}.greeting=${TOO_LONG_GREETING}` } : {}),
    SYSFS_ROOT: join(hostDir, 'sys'),
    MODULE_ROOT: `${NODE}/root`,
    MODPROBE_CONFIG_DIR: MODPROBE_D,
    FIRMWARE_DIR: join(hostDir, 'firmware', options.bigFirmware === true ? `${version}-big` : version),
    FIRMWARE_HOST_DIR: FIRMWARE_HOST,
    CACHE_DIR: `${NODE}/cache`,
    READY_FILE: `${NODE}/.driver-ready`,
    LOCK_PATH: `${NODE}/agent.lock`,
    NEXT_KERNEL_PREFLIGHT: 'false',
    ...GUEST_AGENT_ENV,
  };
}

describe('an agent killed with SIGKILL at each step of a reload, then started again (real kernel adapter, Debian kernel under QEMU)', () => {
  it('the node starts with 1.0.0 loaded and verified by the whole agent (the last good record)', async () => {
    const reset = await guest.run(`printf '\\0' > ${CLASS_PATH}`);
    expect(reset.exitCode, reset.stderr).toBe(0);
    const first = await wholeAgent('1.0.0 first load', agentEnv('1.0.0'));
    expect(first.state).toMatchObject({ phase: 'Loaded', driverVersion: '1.0.0' });
    expect((await look()).loaded).toEqual(versions(sample('1.0.0')));
  }, AGENT_TIMEOUT_MS);

  it.each(CASES.map((c) => [c.step, c] as const))('killed %s: the new agent converges, never half-loaded, no leaked blacklist, no stale firmware path', async (_step, killCase) => {
    const from: Version = killCase.target === '1.0.0' ? '2.0.0' : '1.0.0';
    const target = agentEnv(killCase.target, { bigFirmware: killCase.kill.kind === 'firmware-copy', failingLoad: killCase.targetFails });
    expect((await look()).loaded, `the chain's previous case left ${from} loaded`).toEqual(versions(sample(from)));

    const kill: AgentKill = killCase.kill.kind === 'pause' ? killCase.kill : { kind: 'when-exists', path: `${FIRMWARE_HOST}/${BIG_FIRMWARE_DIR}` };
    const killedAt = await runAgentUntilKilled(guest, target, kill, { timeoutMs: AGENT_TIMEOUT_MS });
    const left = await look();
    if (killCase.kill.kind === 'firmware-copy') {
      // The kill landed mid-copy: not every firmware file is there yet.
      expect(BIG_FIRMWARE.every((b) => left.firmware.includes(`${BIG_FIRMWARE_DIR}/${b}`)), `killed ${killedAt}: ${left.firmware.join(', ')}`).toBe(false);
      // No firmware file is under its name before it is whole, and the old driver still runs.
      expect(left.firmware.filter((f) => f.endsWith('(truncated)'))).toEqual([]);
      expect(left.loaded).toEqual(versions(sample(from)));
    }

    const restarted = await wholeAgent(`after the kill ${killCase.step}`, target);
    const after = await look();
    const row = `| ${killCase.step} (${from} → ${killCase.target}) | ${describeLook(left)} | ${restarted.state.phase} ${restarted.state.reason}${restarted.state.driverVersion === undefined ? '' : ` ${restarted.state.driverVersion}`} | ${describeLook(after)} |`;
    table.push(row);
    console.info(`kernel tests: agent killed mid-reload: ${row}`);

    expect(restarted.state).toMatchObject({ phase: killCase.converges.phase, reason: killCase.converges.reason });
    if (killCase.converges.phase === 'Loaded') expect(restarted.state.driverVersion).toBe(killCase.converges.version);
    else expect(restarted.state.message).toContain(`rolled back to the last good driver ${killCase.converges.version}`);
    // Both modules of one version: never a half-loaded set.
    expect(after.loaded).toEqual(versions(sample(killCase.converges.version)));
    // The blacklist lives only during a reload.
    expect(after.modprobeD).not.toContain(BLACKLIST_FILE);
    // The kernel looks for firmware in the driver's dir, which holds every file whole.
    expect(after.firmwarePath).toBe(FIRMWARE_HOST);
    expect(after.firmware).toContain(`${DRIVER}-${killCase.converges.version}/fw.bin`);
    if (killCase.kill.kind === 'firmware-copy') for (const name of BIG_FIRMWARE) expect(after.firmware).toContain(`${BIG_FIRMWARE_DIR}/${name}`);
    expect(after.firmware.filter((f) => f.endsWith('(truncated)') || f.includes(PARTIAL_FIRMWARE_SUFFIX))).toEqual([]);
    // What to put back on stop is the path before the first agent (none), not the driver's own dir.
    const recorded = await guest.run(`cat ${FIRMWARE_HOST}/${PATH_BEFORE_FILE}`);
    expect(recorded.stdout.replace(/\0/g, '')).toBe('');
  }, 3 * AGENT_TIMEOUT_MS);
});

function versions(built: BuiltDriver): Record<string, string | null> {
  return Object.fromEntries(built.modules.map((m) => [m.name, m.srcversion ?? null]));
}

/** The whole agent for one attempt, a fresh instance in the guest's scenario process. */
async function wholeAgent(name: string, env: Record<string, string>): Promise<{ state: DriverState }> {
  const steps = await runAgentSteps(guest, name, { steps: [{ kind: 'agent-attempt', env, timeoutMs: AGENT_TIMEOUT_MS }], watch: [CORE, NET] }, { timeoutMs: AGENT_TIMEOUT_MS });
  const state = stepAt(steps, 0).agentState;
  if (state === undefined) throw new Error(`${name}: the attempt reported no state`);
  return { state };
}

async function look(): Promise<NodeLook> {
  const sources = join(hostDir, 'firmware');
  const script = [
    `for m in ${CORE} ${NET}; do printf '%s ' $m; cat /sys/module/$m/srcversion 2>/dev/null || echo -; done`,
    'echo ---',
    `ls ${MODPROBE_D} 2>/dev/null`,
    'echo ---',
    `tr -d '\\0' < ${CLASS_PATH}; echo`,
    'echo ---',
    // Each file of the firmware host dir: truncated when no source has it whole.
    `cd ${FIRMWARE_HOST} 2>/dev/null && find . -type f ! -name '${PATH_BEFORE_FILE}' | sed 's|^\\./||' | sort | while read -r f; do whole=; for s in ${sources}/*/; do if [ -e "$s$f" ] && cmp -s "$f" "$s$f"; then whole=1; fi; done; case "$f" in *${PARTIAL_FIRMWARE_SUFFIX}) echo "$f";; *) if [ -n "$whole" ]; then echo "$f"; else echo "$f (truncated)"; fi;; esac; done`,
  ].join('\n');
  const out = await guest.run(script, { timeoutMs: 300_000 });
  const [modules = '', listing = '', path = '', firmware = ''] = out.stdout.split('---\n');
  const lines = (text: string): string[] => text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  return {
    loaded: Object.fromEntries(
      lines(modules).map((l) => {
        const [name = '', srcversion = '-'] = l.split(' ');
        return [name, srcversion === '-' ? null : srcversion];
      }),
    ),
    modprobeD: lines(listing),
    firmwarePath: path.trim(),
    firmware: lines(firmware),
  };
}

function describeLook(l: NodeLook): string {
  const version = (srcversion: string | null): string => {
    if (srcversion === null) return 'none';
    const of = [sample('1.0.0'), sample('2.0.0')].find((b) => b.modules.some((m) => m.srcversion === srcversion));
    return of?.version ?? srcversion;
  };
  const modules = Object.entries(l.loaded).map(([name, s]) => `${name} ${version(s)}`).join(', ');
  const blacklist = l.modprobeD.includes(BLACKLIST_FILE) ? 'blacklist file present' : 'no blacklist file';
  const firmware = l.firmware.filter((f) => !f.startsWith(`${DRIVER}-`) || f.endsWith(')'));
  return `${modules}; ${blacklist}; firmware path ${l.firmwarePath === '' ? '(none)' : l.firmwarePath}${firmware.length === 0 ? '' : `; ${firmware.join(', ')}`}`;
}
