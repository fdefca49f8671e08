import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driverFlavour } from '../../drivers/flavours.ts';
import { stageDriverRoot } from '../../drivers/stage-driver-root.ts';
import { DRIVER_ROOT_MANIFEST, parseDriverRootManifest } from '../../shared/driver-root-manifest.ts';
import { aRealtekRtl8168, aSysfsTree } from '../fixtures/sysfs/sysfs-tree.ts';
import { ensureR8168Modules, type VendorModules } from '../vendor-drivers/ensure-vendor-builds.ts';
import { bootGuest, type Guest } from './harness/boot-guest.ts';
import { findTestKernel } from './harness/find-test-kernel.ts';
import { GUEST_NODE_COMPILE_CACHE, projectNode, shellQuote } from './harness/run-guest-scenario.ts';

/*
 * The driver root follows the loaded driver, not the pod: the whole agent (agent/main.ts, as the
 * image runs it, one process per "pod") on Debian's kernel under QEMU, loading Debian's r8168
 * for real, with the dkms-nic driver image's root (made by the image build's own
 * drivers/stage-driver-root.ts, as it goes to /opt/driver-root; test/images reads it back from
 * the built images) published at the preset's path while r8168 is loaded:
 *
 *   start (v1)                    → published, ready marker written (r8168 live, the check ran in the root)
 *   SIGTERM, start again (v1)     → the same mount kept (a restart-only driver-pod restart)
 *   SIGTERM, start v2 (new root, new parameters: a reload)
 *                                 → switched to v2's root, v1's copy gone
 *   SIGKILL, a mount stacked on top (what a killed agent may leave), start v1
 *                                 → replaced: one mount, v1's root
 *   SIGTERM with UNLOAD_ON_STOP   → r8168 unloaded, the root, its copies and the marker gone
 *
 * v2's root is v1's with another release in its manifest: another image's root as the agent
 * sees it (its manifest names the copy). There is no API server in the guest (the agent's client
 * points at a closed port): an uninstall with the DaemonSet gone, which the agent reads from the
 * API, is the unit tests' (test/unit/agent/root/); here the driver goes by its unload on stop.
 */

const REPO = resolve(import.meta.dirname, '../..');
const STATE = '/var/lib/driver-rollout';
const ROOT_PATH = '/run/driver-rollout/nic/driver';
const MARKER = '/run/driver-rollout/nic/validations/.driver-ctr-ready';
const READY_FILE = '/run/driver-rollout/nic/.driver-ready';
const STORE = `${STATE}/cache/driver-root/nic`;
/**
 * Starting Node and the agent under emulation: at load average 30 the NVIDIA kernel test's agent
 * took 500 s. Only catches a hang.
 */
const AGENT_TIMEOUT_MS = 600_000;

interface RootState {
  /** Mount IDs stacked at the root's path, bottom first. */
  readonly mounts: number[];
  /** The release the published root's manifest names; null when nothing readable is there. */
  readonly shown: string | null;
  readonly marker: boolean;
  /** The copies under the agent's store. */
  readonly copies: string[];
  /** /sys/module/r8168/srcversion, null when r8168 is not loaded. */
  readonly r8168: string | null;
  /** The root's C library run chrooted there, first line; null when it did not run. */
  readonly chroot: string | null;
  /** /proc inside the root shows processes (the node's /proc is bound there). */
  readonly proc: boolean;
}

let guest: Guest;
let hostDir: string;
let r8168: VendorModules;
let agents = 0;

beforeAll(async () => {
  const started = performance.now();
  const kernel = await findTestKernel();
  r8168 = await ensureR8168Modules(kernel.version);
  // Everything the guest reads from the host is written before the boot (9p cache=loose).
  hostDir = await mkdtemp(join(tmpdir(), 'driver-rollout-root-guest-'));
  const v1 = join(hostDir, 'root-v1');
  await stageDriverRoot(driverFlavour('dkms-nic'), v1);
  const manifest = parseDriverRootManifest(await readFile(join(v1, DRIVER_ROOT_MANIFEST), 'utf8'));
  if (typeof manifest === 'string') throw new Error(`the dkms-nic image's root manifest: ${manifest}`);
  const v2 = join(hostDir, 'root-v2');
  await cp(v1, v2, { recursive: true, verbatimSymlinks: true });
  await writeFile(join(v2, DRIVER_ROOT_MANIFEST), `${JSON.stringify({ ...manifest, driverVersion: `${manifest.driverVersion}+v2` }, null, 2)}\n`);
  // The fixture shows an RTL8168; loaded modules are the guest kernel's own.
  const sys = await aSysfsTree().with(aRealtekRtl8168('0000:02:00.0', 'enp2s0')).writeTo(join(hostDir, 'sys'));
  await symlink('/sys/module', join(sys, 'module'));
  const prebuilt = join(hostDir, 'prebuilt', kernel.version);
  await mkdir(prebuilt, { recursive: true });
  await cp(r8168.files['r8168'] ?? '', join(prebuilt, 'r8168.ko'));
  await writeFile(join(prebuilt, 'modules.order'), 'r8168.ko\n');
  await writeFile(
    join(hostDir, 'kubeconfig'),
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'none', cluster: { server: 'https://127.0.0.1:9', 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'none', user: { token: 'none' } }],
      contexts: [{ name: 'none', context: { cluster: 'none', user: 'none' } }],
      'current-context': 'none',
    }),
  );
  guest = await bootGuest({ kernel, writableDirs: [GUEST_NODE_COMPILE_CACHE], bootTimeoutMs: 300_000 });
  console.info(`kernel tests (driver root): ${guest.kernel.version} booted in ${Math.round(guest.bootMs)} ms; ready after ${Math.round(performance.now() - started)} ms`);
}, 3_600_000);

afterAll(async () => {
  await (guest as Guest | undefined)?.stop();
  if ((hostDir as string | undefined) !== undefined) await rm(hostDir, { recursive: true, force: true });
});

/** The dkms-nic preset's agent settings (charts/driver-rollout/templates/_presets.tpl), at this guest's paths. */
function agentEnv(root: 'v1' | 'v2', more: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_NAME: 'guest',
    POD_NAME: `nic-driver-${agents}`,
    POD_NAMESPACE: 'driver-rollout',
    DRIVER_NAME: 'nic',
    DRIVER_VERSION: driverFlavour('dkms-nic').driverVersion,
    DRIVER_SOURCE_DIR: r8168.sourceDir,
    BUILD_RECIPE: JSON.stringify({ kind: 'dkms', packages: r8168.packages }),
    PREBUILT_MODULES_DIR: join(hostDir, 'prebuilt'),
    DEVICE_VENDORS: '10ec',
    DEVICE_CLASSES: '0200',
    SYSFS_ROOT: join(hostDir, 'sys'),
    MODULE_ROOT: `${STATE}/nic/root`,
    HOST_MODULE_ROOT: '/',
    CACHE_DIR: `${STATE}/cache`,
    READY_FILE,
    LOCK_PATH: '/run/driver-rollout/nic/agent.lock',
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    KUBECONFIG: join(hostDir, 'kubeconfig'),
    NEXT_KERNEL_PREFLIGHT: 'false',
    RETRY_INITIAL_SECONDS: '600',
    RETRY_MAX_SECONDS: '600',
    DRIVER_ROOT_DIR: join(hostDir, `root-${root}`),
    DRIVER_ROOT_PATH: ROOT_PATH,
    DRIVER_READY_MARKER: MARKER,
    // The root's own C library, run chrooted in the published root: it can be entered.
    DRIVER_ROOT_CHECK: '/lib/x86_64-linux-gnu/libc.so.6',
    LOG_LEVEL: 'debug',
    ...more,
  };
}

async function sh(script: string, timeoutMs = 60_000): Promise<string> {
  const result = await guest.run(script, { timeoutMs });
  if (result.exitCode !== 0) throw new Error(`guest command failed (${result.exitCode}): ${script}\n${result.stdout}\n${result.stderr}\n${guest.consoleTail().slice(-2000)}`);
  return result.stdout;
}

/** Starts agent/main.ts in the background of the guest; returns its log file and pid file. */
async function startAgent(env: Record<string, string>): Promise<{ log: string; pid: string }> {
  agents += 1;
  const log = join(guest.workDir, `agent-${agents}.log`);
  const pid = join(guest.workDir, `agent-${agents}.pid`);
  const vars = Object.entries({ ...env, POD_NAME: `nic-driver-${agents}`, NODE_COMPILE_CACHE: GUEST_NODE_COMPILE_CACHE })
    .map(([k, v]) => `${k}=${shellQuote(v)}`)
    .join(' ');
  await sh(`cd ${shellQuote(REPO)} && env ${vars} ${shellQuote(projectNode())} agent/main.ts >${shellQuote(log)} 2>&1 </dev/null & echo $! >${shellQuote(pid)}`);
  return { log, pid };
}

/** Waits in the guest until `condition` (sh) holds; fails with the agent's log. Returns the wait in ms. */
async function waitFor(condition: string, agent: { log: string }, what: string): Promise<number> {
  const started = performance.now();
  // The guest gives up first (its clock), so that its log can still be read here. Polled every
  // 5 s, to leave the one emulated CPU to the agent.
  const result = await guest.run(`end=$(($(date +%s) + ${AGENT_TIMEOUT_MS / 1000})); until ${condition}; do [ $(date +%s) -gt $end ] && exit 1; sleep 5; done`, {
    timeoutMs: AGENT_TIMEOUT_MS + 120_000,
  });
  if (result.exitCode !== 0) {
    const seen = await guest.run(`ps -ef | grep -v '\\['; ls -la ${shellQuote(guest.workDir)}; tail -c 6000 ${shellQuote(agent.log)}`);
    throw new Error(`${what}: not within ${AGENT_TIMEOUT_MS / 1000} s; in the guest:\n${seen.stdout}\n${seen.stderr}`);
  }
  return Math.round(performance.now() - started);
}

async function stopAgent(agent: { pid: string }, signal: 'TERM' | 'KILL'): Promise<void> {
  await sh(`p=$(cat ${shellQuote(agent.pid)}); kill -${signal} $p; i=0; while kill -0 $p 2>/dev/null; do i=$((i+1)); [ $i -gt 120 ] && exit 1; sleep 1; done`, 180_000);
}

const shownIs = (release: string) => `[ -e ${MARKER} ] && grep -q '"driverVersion": "${release}"' ${ROOT_PATH}/${DRIVER_ROOT_MANIFEST} 2>/dev/null`;

async function rootState(): Promise<RootState> {
  const out = await sh(
    [
      `echo "mounts=$(awk '$5 == "${ROOT_PATH}" { printf "%s,", $1 }' /proc/self/mountinfo)"`,
      `echo "shown=$(sed -n 's/.*"driverVersion": "\\(.*\\)".*/\\1/p' ${ROOT_PATH}/${DRIVER_ROOT_MANIFEST} 2>/dev/null)"`,
      `echo "marker=$([ -e ${MARKER} ] && echo yes)"`,
      `echo "copies=$(ls ${STORE} 2>/dev/null | tr '\\n' ',')"`,
      `echo "r8168=$(cat /sys/module/r8168/srcversion 2>/dev/null)"`,
      `echo "chroot=$(chroot ${ROOT_PATH} /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null | head -1)"`,
      `echo "proc=$([ -e ${ROOT_PATH}/proc/self/status ] && echo yes)"`,
    ].join('\n'),
  );
  const field = (name: string) => new RegExp(`^${name}=(.*)$`, 'm').exec(out)?.[1] ?? '';
  const list = (name: string) => field(name).split(',').filter((s) => s !== '');
  const orNull = (name: string) => (field(name) === '' ? null : field(name));
  return {
    mounts: list('mounts').map(Number),
    shown: orNull('shown'),
    marker: field('marker') === 'yes',
    copies: list('copies'),
    r8168: orNull('r8168'),
    chroot: orNull('chroot'),
    proc: field('proc') === 'yes',
  };
}

describe("the dkms-nic image's driver root follows the loaded r8168, not the agent (Debian's kernel under QEMU, agent/main.ts as processes)", () => {
  it('published while loaded, kept across a restart, switched on upgrade, replaced after a SIGKILL, gone when the driver is unloaded', async () => {
    const release = driverFlavour('dkms-nic').driverVersion;

    const waits: Record<string, number> = {};
    const first = await startAgent(agentEnv('v1'));
    waits['published'] = await waitFor(shownIs(release), first, 'the first agent publishes its root');
    const published = await rootState();
    expect(published).toMatchObject({ shown: release, marker: true, proc: true, r8168: r8168.built.modules[0]?.srcversion });
    expect(published.mounts).toHaveLength(1);
    expect(published.copies).toHaveLength(1);
    expect(published.chroot).toMatch(/^GNU C Library/);

    // A restart-only driver-pod restart: the modules stay, and so do the root and its marker.
    await stopAgent(first, 'TERM');
    expect(await rootState()).toEqual(published);
    const restarted = await startAgent(agentEnv('v1'));
    waits['restarted'] = await waitFor(`[ -e ${READY_FILE} ]`, restarted, 'the restarted agent finds its driver loaded');
    expect(await rootState()).toEqual(published);
    expect(await readFile(restarted.log, 'utf8')).not.toContain('driver root published');

    // An upgrade: a new root and new parameters (a reload); the root switches once the new driver is verified.
    await stopAgent(restarted, 'TERM');
    const upgraded = await startAgent(agentEnv('v2', { MODULE_PARAMETERS: 'r8168.eee_enable=0' }));
    waits['switched'] = await waitFor(shownIs(`${release}+v2`), upgraded, 'the upgraded agent switches the root');
    const switched = await rootState();
    expect(switched).toMatchObject({ shown: `${release}+v2`, marker: true, r8168: published.r8168, proc: true });
    expect(switched.mounts).toHaveLength(1);
    expect(switched.mounts).not.toEqual(published.mounts);
    expect(switched.copies).toHaveLength(1);
    expect(switched.copies).not.toEqual(published.copies);
    const upgradeLog = await readFile(upgraded.log, 'utf8');
    expect(upgradeLog).toContain('reloaded: unloaded [r8168], loaded [r8168]');
    expect(upgradeLog).toContain(`driver root replaced at ${ROOT_PATH}`);

    // SIGKILL: nothing is cleaned up; a stale mount stacked on the path, as a kill in mid-switch leaves.
    await stopAgent(upgraded, 'KILL');
    await sh(`mount --bind /tmp ${ROOT_PATH}`);
    expect((await rootState()).mounts).toHaveLength(2);
    const next = await startAgent(agentEnv('v1', { UNLOAD_ON_STOP: 'true' }));
    waits['replaced'] = await waitFor(shownIs(release), next, 'the next agent replaces the stale mounts');
    const replaced = await rootState();
    expect(replaced).toMatchObject({ shown: release, marker: true, proc: true });
    expect(replaced.mounts).toHaveLength(1);
    expect(replaced.copies).toEqual(published.copies);
    expect(await readFile(next.log, 'utf8')).toContain('reloaded: unloaded [r8168], loaded [r8168]');

    // The driver goes (unloaded on stop): the root, its copies and the marker go with it.
    await stopAgent(next, 'TERM');
    expect(await rootState()).toEqual({ mounts: [], shown: null, marker: false, copies: [], r8168: null, chroot: null, proc: false });
    console.info(`kernel tests (driver root): agent start to the root's state, ms: ${JSON.stringify(waits)}`);
    console.info(`kernel tests (driver root): published ${JSON.stringify(published)}, switched ${JSON.stringify(switched)}, replaced ${JSON.stringify(replaced)}`);
  }, 4 * AGENT_TIMEOUT_MS + 300_000);
});
