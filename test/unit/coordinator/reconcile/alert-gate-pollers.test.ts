/**
 * The leader's alert gate polls: asked at once and then every interval, the last reading kept, the
 * loop woken only when the gate's result changes. Prometheus is behind the AskAlertGate port here
 * (a scripted one: readings chosen by the test); the real one is asked in
 * test/integration/coordinator/alert-gate.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AlertGateSource } from '../../../../coordinator/alerts/ask-alert-gate.ts';
import type { AlertGateReading } from '../../../../coordinator/plan/snapshot.ts';
import { parseDriverRolloutSpec, type AlertGatePolicy } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { AlertGatePollers } from '../../../../coordinator/reconcile/alert-gate-pollers.ts';
import { createLogger } from '../../../../shared/logger.ts';

function aGate(over: Record<string, unknown> = {}): AlertGatePolicy {
  const parsed = parseDriverRolloutSpec({ driverName: 'gpu', selector: { matchLabels: { app: 'gpu' } }, alertGate: { url: 'http://prometheus:9090', intervalSeconds: 30, ...over } });
  if (!parsed.ok || parsed.policy.alertGate === null) throw new Error('bad gate');
  return parsed.policy.alertGate;
}
const firing = (...names: string[]): AlertGateReading => ({ kind: 'answered', firing: names.map((name) => ({ name, labels: { alertname: name, instance: `i-${name}` } })) });

let readings: AlertGateReading[];
let asked: AlertGateSource[];
let changes: number;
let pollers: AlertGatePollers;
const term = new AbortController();

beforeEach(() => {
  vi.useFakeTimers();
  readings = [];
  asked = [];
  changes = 0;
  pollers = new AlertGatePollers({
    ask: (source) => {
      asked.push(source);
      return Promise.resolve(readings.shift() ?? firing());
    },
    onChange: () => { changes += 1; },
    logger: createLogger('test', 'silent'),
    now: Date.now,
  });
});

afterEach(() => {
  pollers.clear();
  vi.useRealTimers();
});

describe('AlertGatePollers', () => {
  it('asks at once, keeps the reading, and wakes the loop for the first one', async () => {
    readings = [firing('NodeDown')];
    expect(pollers.reading('ns/gpu')).toBeNull();
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(asked.map((s) => s.namespace)).toEqual(['ns']);
    expect(pollers.reading('ns/gpu')).toEqual(firing('NodeDown'));
    expect(changes).toBe(1);
  });

  it('asks again every interval; wakes the loop only when the names or the problem change', async () => {
    readings = [firing('NodeDown'), firing('NodeDown'), firing('NodeDown', 'DiskFull'), firing(), { kind: 'unanswered', problem: 'no answer within 10s' }, { kind: 'unanswered', problem: 'no answer within 10s' }];
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) {
      await vi.advanceTimersByTimeAsync(i === 0 ? 0 : 30_000);
      seen.push(changes);
    }
    expect(asked).toHaveLength(6);
    // firing NodeDown (1), same (1), +DiskFull (2), resolved (3), unreachable (4), same problem (4)
    expect(seen).toEqual([1, 1, 2, 3, 4, 4]);
    expect(pollers.reading('ns/gpu')).toEqual({ kind: 'unanswered', problem: 'no answer within 10s' });
  });

  it('the same sync again asks nothing more; a changed connection asks afresh, forgetting the reading; changed patterns do not', async () => {
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    await vi.advanceTimersByTimeAsync(0);
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate({ alerts: ['Node.*'] }) }], term.signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(asked).toHaveLength(1);
    readings = [firing('NodeDown')];
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate({ url: 'http://other:9090' }) }], term.signal);
    expect(pollers.reading('ns/gpu')).toBeNull();
    await vi.advanceTimersByTimeAsync(0);
    expect(asked.map((s) => s.gate.url)).toEqual(['http://prometheus:9090', 'http://other:9090']);
    expect(pollers.reading('ns/gpu')).toEqual(firing('NodeDown'));
  });

  it('a gate no longer synced is no longer asked, and has no reading', async () => {
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    await vi.advanceTimersByTimeAsync(0);
    pollers.sync([], term.signal);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(asked).toHaveLength(1);
    expect(pollers.reading('ns/gpu')).toBeNull();
  });

  it('an ask that rejects (a bug) holds starts with its message and polling goes on', async () => {
    const broken = new AlertGatePollers({ ask: () => Promise.reject(new Error('boom')), onChange: () => undefined, logger: createLogger('test', 'silent'), now: Date.now });
    broken.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(broken.reading('ns/gpu')).toEqual({ kind: 'unanswered', problem: 'boom' });
    broken.clear();
  });

  it('a new term starts from the last term\'s reading while it is younger than an interval, and asks at once; an older one is not given', async () => {
    readings = [firing('NodeDown')];
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    await vi.advanceTimersByTimeAsync(0);
    pollers.clear();
    expect(pollers.reading('ns/gpu')).toBeNull();
    await vi.advanceTimersByTimeAsync(10_000);
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    expect(pollers.reading('ns/gpu')).toEqual(firing('NodeDown'));
    await vi.advanceTimersByTimeAsync(0);
    expect(asked).toHaveLength(2);
    pollers.clear();
    await vi.advanceTimersByTimeAsync(30_000);
    pollers.sync([{ key: 'ns/gpu', namespace: 'ns', gate: aGate() }], term.signal);
    expect(pollers.reading('ns/gpu')).toBeNull();
  });
});
