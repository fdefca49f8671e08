import { appendFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireNodeLock } from '../../../../agent/acquire-node-lock.ts';
import { findInstalledKernels } from '../../../../agent/build/find-installed-kernels.ts';
import { parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { buildDriverFor, createAgentSteps, judgeNextKernelSignatures } from '../../../../agent/create-agent-steps.ts';
import { parseSignaturePolicy } from '../../../../agent/kernel/plan/module-signature-trust.ts';
import { fixedHostInfo } from '../../../../agent/detect/host-info.ts';
import type { NextKernelResult } from '../../../../agent/preflight/next-kernel-report.ts';
import { preflightNextKernels, runNextKernelPreflight, type NextKernelPreflightDeps } from '../../../../agent/preflight/run-next-kernel-preflight.ts';
import { createAgentMetrics } from '../../../../agent/report/agent-metrics.ts';
import type { NodeEventInput } from '../../../../agent/report/node-events.ts';
import type { LabelPatch } from '../../../../agent/report/node-labels.ts';
import type { DriverState } from '../../../../agent/report/driver-state.ts';
import { createStateReporter } from '../../../../agent/report/state-reporter.ts';
import { runAgent } from '../../../../agent/run-agent.ts';
import { driverKeys } from '../../../../shared/keys.ts';
import { createLogger } from '../../../../shared/logger.ts';
import { SimulatedKernel } from '../../../doubles/simulated-kernel.ts';
import { aNicOnlyNode } from '../../../fixtures/sysfs/sysfs-tree.ts';
import { writeSampleDriverSource } from '../agent-fixtures.ts';

// The next-kernel preflight against two REAL Debian kernel header versions installed side by side
// (scripts/ensure-next-kernel-headers.sh, run by `npm test`'s setup): real kbuild of the sample
// driver, the real module cache, the real agent flow. Only the final module load goes to the
// simulated kernel (this machine's kernel must not be touched); labels and Events go to
// in-memory sinks (the agent's own ports; the writers themselves are tested against the API server).

const HEADERS = '/usr/src/linux-headers-{kernel}';
const log = createLogger('test', 'silent');
const keys = driverKeys('drsample');
let work: string;
let kernels: string[];
/** The newest: plays the running kernel first. */
let running: string;
/** The older one: installed, not running (a pending update in reverse; what matters is "not running"). */
let next: string;

beforeAll(async () => {
  kernels = await findInstalledKernels([HEADERS]);
  if (kernels.length < 2) {
    throw new Error(`two kernel header versions are needed side by side, found ${kernels.join(', ') || 'none'}: run scripts/ensure-next-kernel-headers.sh`);
  }
  running = kernels.at(-1) ?? '';
  next = kernels.at(-2) ?? '';
  work = await mkdtemp(join(tmpdir(), 'next-kernel-'));
}, 60_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

function configFor(name: string, env: Record<string, string>) {
  return parseAgentConfig([], {
    NODE_NAME: 'n1',
    POD_NAME: name,
    POD_NAMESPACE: 'ns',
    DRIVER_NAME: 'drsample',
    DEVICE_KIND: 'nic',
    DRIVER_VERSION: '2.0.0',
    HEADERS_DIRS: HEADERS,
    KERNEL_ADAPTER: 'simulated',
    MODULE_ROOT: join(work, name, 'root'),
    MODPROBE_CONFIG_DIR: join(work, name, 'modprobe.d'),
    READY_FILE: join(work, name, '.driver-ready'),
    LOCK_PATH: join(work, name, 'agent.lock'),
    ...env,
  });
}

/** In-memory sinks for the preflight's reports, and the real metrics over a fresh registry. */
function recordingDeps(config: ReturnType<typeof configFor>) {
  const registry = new Registry();
  const labels: LabelPatch[] = [];
  const events: NodeEventInput[] = [];
  const deps: NextKernelPreflightDeps = {
    keys,
    context: { driver: config.driver, version: config.driverVersion },
    findKernels: () => findInstalledKernels([HEADERS]),
    build: (kernel, signal) => buildDriverFor(config, kernel, { log, signal, background: true }),
    writeLabels: (patch) => { labels.push(patch); return Promise.resolve(); },
    recordEvent: (event) => { events.push(event); return Promise.resolve(); },
    metrics: createAgentMetrics(registry, config.driver),
    log,
  };
  return { deps, labels, events, registry };
}

/** /proc/keys of a Debian node under Secure Boot: the distribution's CA only. */
const DEBIAN_PROC_KEYS = '2a2b3c4d I------     1 perm 1f030000     0     0 asymmetri Debian Secure Boot CA: 6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1: X509.rsa cb419ea1 []';

const cacheEntries = async (cacheDir: string, kernel: string) => readdir(join(cacheDir, kernel)).catch(() => []);

describe('next-kernel preflight with two real kernel header versions', { timeout: 600_000 }, () => {
  it('the agent loads for the running kernel, then builds the other kernel in the background and reports it ready', async () => {
    const cacheDir = join(work, 'cache');
    const config = configFor('agent-a', { DRIVER_SOURCE_DIR: await writeSampleDriverSource(join(work, 'src-good'), '2.0.0'), CACHE_DIR: cacheDir, KERNEL_VERSION: running });
    const sysfsRoot = await aNicOnlyNode().writeTo(join(work, 'agent-a', 'sys'));
    const kernel = new SimulatedKernel({ sysModuleDir: join(sysfsRoot, 'module'), runningKernelVersion: running });
    const { deps, labels, events, registry } = recordingDeps({ ...config, sysfsRoot });
    // Every build the preflight asked for, by kernel.
    const reported = new Map<string, NextKernelResult & { outcome: 'ready' }>();
    const stop = new AbortController();
    const metrics = createAgentMetrics(new Registry(), config.driver);
    const states: DriverState[] = [];
    const reporter = createStateReporter({ driver: config.driver, keys, readyFilePath: config.readyFile, metrics, sinks: {}, log, now: () => new Date(), retryDelayMs: () => 10 });
    const done = runAgent(
      {
        driver: config.driver,
        steps: createAgentSteps({ ...config, sysfsRoot }, kernel, fixedHostInfo({ kernelRelease: running, distro: 'debian', distroRelease: '12', arch: 'x64' }), log),
        reporter: { ...reporter, report: (s) => { states.push(s); return reporter.report(s); } },
        metrics,
        log,
        lock: (signal, lockEvents) => acquireNodeLock({ path: config.lockPath, signal, onWaiting: lockEvents.onWaiting, onCompromised: lockEvents.onLost, retryMs: 50 }),
        retry: { initialMs: 50, maxMs: 200 },
        verifyIntervalMs: 60_000,
        unloadOnStop: false,
        stopFlushMs: 100,
        random: () => 0,
        preflight: (runningKernel, signal) =>
          runNextKernelPreflight(
            {
              ...deps,
              intervalMs: 600_000,
              build: async (k, buildSignal) => {
                const built = await deps.build(k, buildSignal);
                reported.set(k, { kernel: k, outcome: 'ready', cacheHit: built.cacheHit, durationMs: built.durationMs });
                return built;
              },
            },
            runningKernel,
            signal,
          ),
      },
      stop.signal,
    );
    await waitFor(() => labels.length > 0, 500_000);
    stop.abort();
    await done;

    expect(states.find((s) => s.phase === 'Loaded')?.message).toContain(`on kernel ${running}`);
    expect(kernel.history.filter((e) => e.op === 'insmod').map((e) => e.module)).toEqual(['drsample_core', 'drsample_net']);
    // Only the other kernel is preflighted, compiled (cold) and cached under its release.
    expect([...reported.keys()]).toEqual(kernels.filter((k) => k !== running));
    expect(reported.get(next)?.cacheHit).toBe(false);
    expect(await cacheEntries(cacheDir, next)).toHaveLength(1);
    expect(labels).toEqual([{ [keys.nextKernel]: 'ready', [keys.nextKernelFailed]: null }]);
    expect(events).toEqual([expect.objectContaining({ type: 'Normal', reason: 'NextKernelReady', message: expect.stringContaining(`kernel ${next}`) as unknown })]);
    expect(await registry.metrics()).toContain(`driver_rollout_agent_next_kernel_ready{driver="drsample",kernel="${next}"} 1`);
    console.info(`next-kernel preflight: cold build of the sample driver for ${next}: ${reported.get(next)?.durationMs} ms`);

    // A second pass finds it in the cache: nothing compiled, no new Event.
    const again = await preflightNextKernels(deps, running, new Map<string, NextKernelResult>(reported), new AbortController().signal);
    expect(again).toEqual([expect.objectContaining({ kernel: next, outcome: 'ready', cacheHit: true })]);
    expect(events).toHaveLength(1);
    console.info(`next-kernel preflight: cached pass for ${next}: ${again[0]?.durationMs} ms`);

    // The reboot: the "running" kernel is now the other one (host info / KERNEL_VERSION), and no
    // headers can be found (a bogus HEADERS_DIRS): the agent takes the cached modules, no compile.
    const after = configFor('agent-b', { DRIVER_SOURCE_DIR: config.source.kind === 'directory' ? config.source.path : '', CACHE_DIR: cacheDir, KERNEL_VERSION: next, HEADERS_DIRS: '/nonexistent/linux-headers-{kernel}' });
    const sysfsAfter = await aNicOnlyNode().writeTo(join(work, 'agent-b', 'sys'));
    const rebooted = new SimulatedKernel({ sysModuleDir: join(sysfsAfter, 'module'), runningKernelVersion: next });
    const steps = createAgentSteps({ ...after, sysfsRoot: sysfsAfter }, rebooted, fixedHostInfo({ kernelRelease: next, distro: 'debian', distroRelease: '12', arch: 'x64' }), log);
    const detection = await steps.detect();
    expect(detection.host.kernelRelease).toBe(next);
    const built = await steps.build(detection, new AbortController().signal);
    expect(built).toMatchObject({ kernelVersion: next, cacheHit: true });
    expect(built.modules.every((m) => m.path.startsWith(join(cacheDir, next)))).toBe(true);
    const outcome = await steps.load(built, new AbortController().signal);
    expect(outcome.changed).toBe(true);
    await expect(steps.verify(built)).resolves.toMatchObject({ version: '2.0.0', modules: ['drsample_core', 'drsample_net'] });
    console.info(`after the switch to ${next}: build step ${built.durationMs} ms (cache hit)`);
  });

  it('a kernel that enforces signatures and trusts no key of the build: the driver builds, and the other kernel is reported failed with ModuleSignatureUntrusted before a reboot', async () => {
    // The same sources and cache as the first case: a cache hit when it ran before.
    const config = configFor('agent-d', { DRIVER_SOURCE_DIR: await writeSampleDriverSource(join(work, 'src-good'), '2.0.0'), CACHE_DIR: join(work, 'cache'), KERNEL_VERSION: running });
    // As the node's /sys and /proc would show it under Secure Boot with Debian's keys only.
    const secureBoot = parseSignaturePolicy({ sigEnforce: 'N\n', lockdown: 'none [integrity] confidentiality\n', procKeys: DEBIAN_PROC_KEYS });
    const { deps, labels, events } = recordingDeps(config);
    // The real judge: modinfo on the modules built for that kernel (the sample driver is built unsigned).
    const results = await preflightNextKernels({ ...deps, judgeSignatures: (built) => judgeNextKernelSignatures(config, built, secureBoot) }, running, new Map(), new AbortController().signal);

    expect(results.map((r) => [r.kernel, r.outcome, r.outcome === 'failed' ? r.reason : ''])).toEqual(kernels.filter((k) => k !== running).map((k) => [k, 'failed', 'ModuleSignatureUntrusted']));
    const refused = results.find((r) => r.kernel === next);
    expect(refused?.outcome === 'failed' ? refused.firstError : '').toBe(
      'the kernel enforces module signatures (lockdown=integrity) and would refuse drsample: drsample_core, drsample_net unsigned; the keys it trusts: Debian Secure Boot CA; ' +
        'sign the modules with an enrolled key, or enroll the signing certificate (mokutil --import <certificate.der>, then confirm it in MokManager at the next boot)',
    );
    expect(labels).toEqual([{ [keys.nextKernel]: 'failed', [keys.nextKernelFailed]: next }]);
    expect(events.find((e) => e.message.includes(`kernel ${next}`))?.reason).toBe('NextKernelModulesRefused');

    // The same build under a kernel that does not enforce: ready.
    const lax = parseSignaturePolicy({ sigEnforce: 'N\n', lockdown: '[none] integrity confidentiality\n', procKeys: DEBIAN_PROC_KEYS });
    const again = recordingDeps(config);
    const relaxed = await preflightNextKernels({ ...again.deps, judgeSignatures: (built) => judgeNextKernelSignatures(config, built, lax) }, running, new Map(), new AbortController().signal);
    expect(relaxed.map((r) => r.outcome)).toEqual(kernels.filter((k) => k !== running).map(() => 'ready'));
    expect(again.labels).toEqual([{ [keys.nextKernel]: 'ready', [keys.nextKernelFailed]: null }]);
  });

  it('a deliberately broken source reports the other kernel failed, naming it and the compiler\'s first error', async () => {
    const source = await writeSampleDriverSource(join(work, 'src-broken'), '2.0.1');
    await appendFile(join(source, 'drsample_core.c'), '\nstatic int deliberately_broken(void) { return undeclared_symbol_for_the_test; }\n');
    const config = configFor('agent-c', { DRIVER_SOURCE_DIR: source, CACHE_DIR: join(work, 'cache-broken'), KERNEL_VERSION: running });
    const { deps, labels, events, registry } = recordingDeps(config);
    const results = await preflightNextKernels(deps, running, new Map(), new AbortController().signal);

    expect(results.map((r) => r.kernel)).toEqual(kernels.filter((k) => k !== running));
    for (const r of results) {
      expect(r).toMatchObject({ outcome: 'failed', reason: 'CompileFailed' });
      expect(r.outcome === 'failed' ? r.firstError : '').toMatch(/^drsample_core\.c:\d+:\d+: error: 'undeclared_symbol_for_the_test' undeclared/);
    }
    expect(labels).toEqual([{ [keys.nextKernel]: 'failed', [keys.nextKernelFailed]: next }]);
    const warning = events.find((e) => e.type === 'Warning' && e.message.includes(`kernel ${next}`));
    expect(warning?.reason).toBe('NextKernelBuildFailed');
    expect(warning?.message).toMatch(/CompileFailed: drsample_core\.c:\d+:\d+: error: 'undeclared_symbol_for_the_test' undeclared/);
    expect(await registry.metrics()).toContain(`driver_rollout_agent_next_kernel_ready{driver="drsample",kernel="${next}"} 0`);
    expect(await registry.metrics()).toMatch(/driver_rollout_agent_next_kernel_build_duration_seconds_count\{driver="drsample",result="failed"\} [1-9]/);
  });
});

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the preflight to report');
    await sleep(50);
  }
}
