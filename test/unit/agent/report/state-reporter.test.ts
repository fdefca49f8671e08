import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAgentMetrics } from '../../../../agent/report/agent-metrics.ts';
import type { DriverState } from '../../../../agent/report/driver-state.ts';
import type { NodeEventInput } from '../../../../agent/report/node-events.ts';
import type { NodeMetadataPatch } from '../../../../agent/report/node-labels.ts';
import { createStateReporter, type StateSinks } from '../../../../agent/report/state-reporter.ts';
import { startStatusServer, type StatusServer } from '../../../../agent/report/status-server.ts';
import { driverKeys } from '../../../../shared/keys.ts';
import { createLogger } from '../../../../shared/logger.ts';

const building: DriverState = { phase: 'Building', reason: 'Building', message: 'compiling', deviceCount: 2 };
const loaded: DriverState = { phase: 'Loaded', reason: 'Loaded', message: 'drsample 1.0 loaded', deviceCount: 2, driverVersion: '1.0' };
const failed: DriverState = { phase: 'Failed', reason: 'CompileFailed', message: 'Failed: compile error', deviceCount: 2 };
const stopping: DriverState = { phase: 'Stopping', reason: 'Stopping', message: 'agent stopping' };

let dir: string;
let server: StatusServer | undefined;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'reporter-'));
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await rm(dir, { recursive: true, force: true });
});

async function aReporter(sinks: StateSinks = {}) {
  const registry = new Registry();
  const readyFilePath = join(dir, 'run', '.driver-ready');
  const reporter = createStateReporter({
    driver: 'drsample',
    keys: driverKeys('drsample', 'example.com'),
    readyFilePath,
    metrics: createAgentMetrics(registry, 'drsample'),
    sinks,
    log: createLogger('test', 'silent'),
    now: () => new Date('2026-11-22T03:00:00Z'),
    retryDelayMs: () => 5,
  });
  server = await startStatusServer({ port: 0, host: '127.0.0.1', readiness: () => reporter.readiness(), healthy: () => true, registry });
  const base = `http://127.0.0.1:${server.port}`;
  const readyz = async () => (await fetch(`${base}/readyz`)).status;
  const fileExists = () => access(readyFilePath).then(() => true, () => false);
  return { reporter, readyFilePath, readyz, fileExists, base };
}

describe('createStateReporter with the status server', () => {
  it('the ready file and /readyz flip together, both ways', async () => {
    const r = await aReporter();
    await r.reporter.report(building);
    expect([await r.readyz(), await r.fileExists()]).toEqual([503, false]);
    await r.reporter.report(loaded);
    expect([await r.readyz(), await r.fileExists()]).toEqual([200, true]);
    expect(JSON.parse(await readFile(r.readyFilePath, 'utf8'))).toMatchObject({ driver: 'drsample', phase: 'Loaded', driverVersion: '1.0' });
    await r.reporter.report(stopping);
    expect([await r.readyz(), await r.fileExists()]).toEqual([503, false]);
  });

  it('/readyz turns 503 synchronously when readiness is lost, before the file is even removed', async () => {
    const r = await aReporter();
    await r.reporter.report(loaded);
    const removal = r.reporter.report(stopping);
    expect(r.reporter.readiness()).toEqual({ ready: false, detail: 'Stopping: agent stopping' });
    await removal;
    expect(await r.fileExists()).toBe(false);
  });

  it('reports in order: a Stopping reported while Loaded is still writing the file leaves no file behind', async () => {
    const r = await aReporter();
    const write = r.reporter.report(loaded);
    const stop = r.reporter.report(stopping);
    await Promise.all([write, stop]);
    expect(await r.fileExists()).toBe(false);
    expect(await r.readyz()).toBe(503);
  });

  it('sends the condition, labels and events to the sinks and serves the state in /metrics', async () => {
    const conditions: string[] = [];
    const patches: NodeMetadataPatch[] = [];
    const events: NodeEventInput[] = [];
    const r = await aReporter({
      writePodCondition: (s) => {
        conditions.push(s.reason);
        return Promise.resolve();
      },
      writeNodeMetadata: (p) => {
        patches.push(p);
        return Promise.resolve();
      },
      recordNodeEvent: (e) => {
        events.push(e);
        return Promise.resolve();
      },
    });
    await r.reporter.report(failed);
    expect(await r.reporter.flush(1000)).toBe(true);
    expect(patches.at(-1)?.annotations).toEqual({ 'driver-rollout.io/drsample-driver-loaded': null });
    await r.reporter.report({ ...loaded, loadedDriver: '{"pod":"ns/p","driver":{}}' });
    expect(await r.reporter.flush(1000)).toBe(true);
    expect(conditions).toEqual(['CompileFailed', 'Loaded']);
    // Labels and the loaded-driver annotation go in one patch.
    expect(patches.at(-1)?.labels).toMatchObject({ 'driver-rollout.io/drsample-driver.version': '1.0', 'driver-rollout.io/drsample-driver.ready': 'true' });
    expect(patches.at(-1)?.annotations).toEqual({ 'driver-rollout.io/drsample-driver-loaded': '{"pod":"ns/p","driver":{}}' });
    expect(events.map((e) => `${e.type} ${e.reason}`)).toEqual(['Warning CompileFailed', 'Normal DriverLoaded']);
    const metrics = await (await fetch(`${r.base}/metrics`)).text();
    expect(metrics).toContain('driver_rollout_agent_state{driver="drsample",phase="Loaded"} 1');
    expect(metrics).toContain('driver_rollout_agent_state{driver="drsample",phase="Failed"} 0');
    expect(metrics).toContain('driver_rollout_agent_devices{driver="drsample"} 2');
  });

  it('sends a ready condition only once the ready file exists', async () => {
    const fileWhenSent: boolean[] = [];
    const r = await aReporter({
      writePodCondition: async (s) => {
        if (s.phase === 'Loaded') fileWhenSent.push(await r.fileExists());
      },
    });
    await r.reporter.report(loaded);
    expect(await r.reporter.flush(1000)).toBe(true);
    expect(fileWhenSent).toEqual([true]);
  });

  it('Loaded then Stopping back to back: the last condition the API gets is Stopping', async () => {
    const sent: string[] = [];
    const r = await aReporter({
      writePodCondition: (s) => {
        sent.push(s.phase);
        return Promise.resolve();
      },
    });
    void r.reporter.report(loaded);
    await r.reporter.report(stopping);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await r.reporter.flush(1000)).toBe(true);
    expect(sent.at(-1)).toBe('Stopping');
    expect(await r.readyz()).toBe(503);
  });

  it('an unreachable API server neither blocks reporting nor the local views', async () => {
    const r = await aReporter({ writePodCondition: () => Promise.reject(new Error('connection refused')) });
    await r.reporter.report(loaded);
    expect(await r.readyz()).toBe(200);
    expect(await r.reporter.flush(50)).toBe(false);
    r.reporter.stop();
  });
});

describe('startStatusServer', () => {
  it('answers /healthz, 404 for unknown paths and 405 for writes', async () => {
    const r = await aReporter();
    expect((await fetch(`${r.base}/healthz`)).status).toBe(200);
    expect((await fetch(`${r.base}/nope`)).status).toBe(404);
    expect((await fetch(`${r.base}/readyz`, { method: 'POST' })).status).toBe(405);
  });
});
