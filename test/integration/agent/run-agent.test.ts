import { access, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireNodeLock } from '../../../agent/acquire-node-lock.ts';
import type { AgentConfig } from '../../../agent/config/agent-config.ts';
import { parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import { createAgentSteps } from '../../../agent/create-agent-steps.ts';
import { fixedHostInfo } from '../../../agent/detect/host-info.ts';
import { SimulatedKernel } from '../../doubles/simulated-kernel.ts';
import { createAgentMetrics } from '../../../agent/report/agent-metrics.ts';
import type { DriverPhase, DriverState } from '../../../agent/report/driver-state.ts';
import { createStateReporter, type StateReporter } from '../../../agent/report/state-reporter.ts';
import { runAgent } from '../../../agent/run-agent.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { createLogger } from '../../../shared/logger.ts';
import { aNicOnlyNode, aNouveauNode, type SysfsTree } from '../../fixtures/sysfs/sysfs-tree.ts';
import { writeSampleDriverSource } from '../../unit/agent/agent-fixtures.ts';
import { installedHeadersKernel } from '../../unit/agent/build/sample-driver.ts';
import { holdOpen } from '../../unit/agent/kernel/fixtures.ts';

// The flow with its real parts: detection on a fixture sysfs tree, a real kbuild of the sample
// driver (compiled once, then from the module cache), the real node lock, and the simulated
// kernel standing in for the node's (this machine's kernel must not be touched). No API server:
// the reporter's local views (state, ready file) are what these tests read. An integration test
// for its real compiler, processes and waits for reported states in real time; the unit project
// holds the flow's parts (test/unit/agent/).

const kernel = installedHeadersKernel();
const log = createLogger('test', 'silent');
let work: string;
let source: string;
let cacheDir: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'run-agent-'));
  source = await writeSampleDriverSource(join(work, 'src'), '2.0.0');
  cacheDir = join(work, 'cache');
}, 60_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

let nodeCount = 0;

/** One node: its sysfs tree, its simulated kernel, its lock path. Agents on it share all three. */
async function aNode(tree: SysfsTree = aNicOnlyNode()) {
  const dir = join(work, `node-${++nodeCount}`);
  const sysfsRoot = await tree.writeTo(join(dir, 'sys'));
  return {
    dir,
    sysfsRoot,
    kernel: new SimulatedKernel({ sysModuleDir: join(sysfsRoot, 'module'), runningKernelVersion: kernel }),
    lockPath: join(dir, 'run', 'agent.lock'),
  };
}
type Node = Awaited<ReturnType<typeof aNode>>;

let agentCount = 0;

/** Starts runAgent on `node`; returns its reporter, its stop switch and its completion. */
interface AgentOptions {
  readonly unloadOnStop?: boolean;
  readonly cacheDir?: string;
  readonly version?: string;
  readonly source?: string;
  readonly deviceFilePrefixes?: string;
  readonly deviceKind?: 'gpu' | 'nic';
}

function startAgent(node: Node, options: AgentOptions = {}) {
  const name = `agent-${++agentCount}`;
  const config: AgentConfig = parseAgentConfig([], {
    NODE_NAME: 'n1',
    POD_NAME: name,
    POD_NAMESPACE: 'ns',
    DRIVER_NAME: 'drsample',
    DEVICE_KIND: options.deviceKind ?? 'nic',
    DRIVER_VERSION: options.version ?? '2.0.0',
    DRIVER_SOURCE_DIR: options.source ?? source,
    DEVICE_FILE_PREFIXES: options.deviceFilePrefixes ?? '',
    KERNEL_VERSION: kernel,
    SYSFS_ROOT: node.sysfsRoot,
    MODULE_ROOT: join(node.dir, 'root'),
    MODPROBE_CONFIG_DIR: join(node.dir, 'modprobe.d'),
    CACHE_DIR: options.cacheDir ?? cacheDir,
    READY_FILE: join(node.dir, name, '.driver-ready'),
    LOCK_PATH: node.lockPath,
    KERNEL_ADAPTER: 'simulated',
  });
  const metrics = createAgentMetrics(new Registry(), config.driver);
  const inner = createStateReporter({
    driver: config.driver,
    keys: driverKeys(config.driver, config.keyDomain),
    readyFilePath: config.readyFile,
    metrics,
    sinks: {},
    log,
    now: () => new Date(),
    retryDelayMs: () => 10,
  });
  // Every state the flow reports, in order, once the local views show it: some pass by faster
  // than any poll could see. (Local updates apply in report order, so this order is theirs.)
  const seen: DriverState[] = [];
  const reporter: StateReporter = {
    ...inner,
    report: (state) => {
      const shown = inner.report(state);
      void shown.then(() => seen.push(state), () => seen.push(state));
      return shown;
    },
  };
  const stop = new AbortController();
  const done = runAgent(
    {
      driver: config.driver,
      steps: createAgentSteps(config, node.kernel, fixedHostInfo({ kernelRelease: kernel, distro: 'debian', distroRelease: '12', arch: 'x64' }), log),
      reporter,
      metrics,
      log,
      lock: (signal, events) =>
        acquireNodeLock({ path: config.lockPath, signal, onWaiting: events.onWaiting, onCompromised: events.onLost, retryMs: 50 }),
      retry: { initialMs: 50, maxMs: 200 },
      verifyIntervalMs: 100,
      unloadOnStop: options.unloadOnStop ?? false,
      stopFlushMs: 100,
      random: () => 0,
    },
    stop.signal,
  );
  let read = 0;
  return {
    reporter,
    readyFile: config.readyFile,
    stop: () => { stop.abort(); },
    done,
    /** The next reported state in `phase`, after the one the previous call returned. */
    async next(phase: DriverPhase, timeoutMs = 120_000): Promise<DriverState> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const i = seen.findIndex((s, n) => n >= read && s.phase === phase);
        const found = seen[i];
        if (found !== undefined) {
          read = i + 1;
          return found;
        }
        if (Date.now() > deadline) throw new Error(`no ${phase} state; reported: ${seen.map((s) => s.phase).join(' → ')}`);
        await sleep(10);
      }
    },
  };
}

const loadedNames = async (k: SimulatedKernel) => (await k.listLoaded()).map((m) => m.name);
const insmods = (k: SimulatedKernel) => k.history.filter((e) => e.op === 'insmod').map((e) => e.module);
const exists = (path: string) => access(path).then(() => true, () => false);

// Compiles with kbuild: minutes on a loaded machine. The bounds only catch a hang.
describe('runAgent with the simulated kernel', { timeout: 300_000 }, () => {
  it('loads the driver, and leaves it loaded on stop by default', async () => {
    const node = await aNode();
    const agent = startAgent(node);
    const state = await agent.next('Loaded');
    expect(state).toMatchObject({ reason: 'Loaded', driverVersion: '2.0.0', deviceCount: 2 });
    expect(insmods(node.kernel)).toEqual(['drsample_core', 'drsample_net']);
    expect(await exists(agent.readyFile)).toBe(true);
    agent.stop();
    await agent.done;
    expect(agent.reporter.current().phase).toBe('Stopping');
    expect(await exists(agent.readyFile)).toBe(false);
    expect(await loadedNames(node.kernel)).toEqual(['drsample_core', 'drsample_net']);
  }, 300_000);

  it('with unload-on-stop, unloads holders first on stop', async () => {
    const node = await aNode();
    const agent = startAgent(node, { unloadOnStop: true });
    await agent.next('Loaded');
    agent.stop();
    await agent.done;
    expect(await loadedNames(node.kernel)).toEqual([]);
    expect(node.kernel.history.filter((e) => e.op === 'rmmod').map((e) => e.module)).toEqual(['drsample_net', 'drsample_core']);
    expect(agent.reporter.current().phase).toBe('Unloaded');
    expect(await exists(agent.readyFile)).toBe(false);
  });

  it('with unload-on-stop but the driver in use: refuses, leaves it loaded, and still stops cleanly', async () => {
    const node = await aNode();
    const agent = startAgent(node, { unloadOnStop: true });
    await agent.next('Loaded');
    const user = await node.kernel.openDevice('drsample_core');
    agent.stop();
    await agent.done;
    expect(await loadedNames(node.kernel)).toEqual(['drsample_core', 'drsample_net']);
    await user.close();
  });

  it('notices a module unloaded behind its back and loads it again', async () => {
    const node = await aNode();
    const agent = startAgent(node);
    await agent.next('Loaded');
    await node.kernel.unload('drsample_net');
    const failed = await agent.next('Failed');
    expect(failed).toMatchObject({ reason: 'VerifyFailed' });
    expect(failed.message).toContain('drsample_net is not loaded');
    await agent.next('Loaded');
    // The whole driver is reloaded (its remaining module unloaded first), never half of it.
    expect(insmods(node.kernel)).toEqual(['drsample_core', 'drsample_net', 'drsample_core', 'drsample_net']);
    expect(await loadedNames(node.kernel)).toEqual(['drsample_core', 'drsample_net']);
    agent.stop();
    await agent.done;
  });

  it('retries a failing load with backoff, showing why, and recovers once the cause is gone', async () => {
    const node = await aNode();
    node.kernel.failInit('drsample_core', 'No such device');
    const agent = startAgent(node);
    const failed = await agent.next('Failed');
    expect(failed.reason).toBe('LoadFailed');
    expect(failed.message).toContain("could not insert 'drsample_core': No such device");
    expect(await exists(agent.readyFile)).toBe(false);
    // The retry's steps keep the failure as the reason (the coordinator sees it persist), saying what is retried.
    const retry = await agent.next('Loading');
    expect(retry.reason).toBe('LoadFailed');
    expect(retry.message).toMatch(/could not insert 'drsample_core': No such device.* \(retry 2: loading /);
    node.kernel.clearInitFailure('drsample_core');
    const loaded = await agent.next('Loaded');
    expect(loaded.reason).toBe('Loaded');
    agent.stop();
    await agent.done;
  });

  it('a second agent on the node waits for the lock, then finds the driver loaded (srcversion fast path)', async () => {
    const node = await aNode();
    const first = startAgent(node);
    await first.next('Loaded');
    const second = startAgent(node);
    await second.next('WaitingForLock');
    await sleep(200);
    expect(second.reporter.current().phase).toBe('WaitingForLock');
    first.stop();
    await first.done;
    const state = await second.next('Loaded');
    expect(state.message).toContain('already loaded');
    expect(insmods(node.kernel)).toEqual(['drsample_core', 'drsample_net']);
    second.stop();
    await second.done;
  });

  it('an upgrade refused because the driver is in use names the module and the process holding its device', async () => {
    const node = await aNode();
    const v2 = startAgent(node);
    await v2.next('Loaded');
    v2.stop();
    await v2.done;
    // A workload opens the driver's device: refcnt above holders in /sys/module, and a real
    // process with the device file open in /proc.
    const user = await node.kernel.openDevice('drsample_core');
    const device = join(node.dir, 'dev', 'drsample0');
    await mkdir(join(node.dir, 'dev'), { recursive: true });
    await writeFile(device, '');
    const holder = await holdOpen(device);
    try {
      const v3 = startAgent(node, { version: '3.0.0', source: await writeSampleDriverSource(join(node.dir, 'src-3'), '3.0.0'), deviceFilePrefixes: join(node.dir, 'dev', 'drsample') });
      const refused = await v3.next('Failed');
      expect(refused.reason).toBe('DriverInUse');
      expect(refused.message).toContain('driver is in use: drsample_core');
      expect(refused.message).toContain(`pid ${String(holder.pid)} (sleep) has ${device} open`);
      expect(insmods(node.kernel)).toEqual(['drsample_core', 'drsample_net']);
      // The workload goes away (the node was drained): the retry replaces the driver.
      await user.close();
      const loaded = await v3.next('Loaded');
      expect(loaded.driverVersion).toBe('3.0.0');
      v3.stop();
      await v3.done;
    } finally {
      holder.kill();
    }
  }, 300_000);

  it('a load failing on a GPU that nouveau holds says so', async () => {
    const node = await aNode(aNouveauNode());
    node.kernel.failInit('drsample_core', 'No such device');
    // A cache of its own: the shared one holds an earlier test's last-good record, which this
    // fresh node would roll back to.
    const agent = startAgent(node, { deviceKind: 'gpu', cacheDir: join(node.dir, 'cache') });
    const failed = await agent.next('Failed');
    expect(failed.reason).toBe('LoadFailed');
    expect(failed.message).toBe(
      "Failed: drsample_core failed to load: could not insert 'drsample_core': No such device; no driver module left loaded; " +
        'the devices are bound to nouveau (see MODULE_BLACKLIST)',
    );
    agent.stop();
    await agent.done;
  });

  it('SIGTERM during a compile stops it promptly and loads nothing', async () => {
    const node = await aNode();
    const agent = startAgent(node, { cacheDir: join(node.dir, 'cold-cache') });
    await agent.next('Building');
    await sleep(300);
    agent.stop();
    // Promptly: the compile was killed, not waited for, so nothing reached the module cache
    // (a finished build stores a manifest.json). A stop that hung would fail by the test timeout.
    await agent.done;
    const stored = (await readdir(join(node.dir, 'cold-cache'), { recursive: true }).catch(() => [])).filter((f) => f.endsWith('manifest.json'));
    expect(stored).toEqual([]);
    expect(insmods(node.kernel)).toEqual([]);
    expect(agent.reporter.current().phase).toBe('Stopping');
  });

  it('stopping while waiting for the lock ends at once without touching the kernel', async () => {
    const node = await aNode();
    const first = startAgent(node);
    await first.next('Loaded');
    const second = startAgent(node);
    await second.next('WaitingForLock');
    second.stop();
    await second.done;
    expect(second.reporter.current().phase).toBe('Stopping');
    first.stop();
    await first.done;
  });
});
