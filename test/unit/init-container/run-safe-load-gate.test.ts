import { resolve, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../init-container/clock.ts';
import { ModulesInUseError } from '../../../init-container/errors.ts';
import { InMemoryNodeApi } from '../../doubles/in-memory-node-api.ts';
import { runSafeLoadGate } from '../../../init-container/run-safe-load-gate.ts';
import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { captureLogger } from './capture-logger.ts';

const keys = driverKeys('gpu');
const FIXTURES = resolve(import.meta.dirname, '../../fixtures/sys-module');

/** Plays the coordinator: removes the mark once the gate has set it (as after cordon and drain). */
async function coordinatorClears(api: InMemoryNodeApi): Promise<void> {
  for (let i = 0; i < 500 && api.node('node-a')?.annotations[keys.waitForSafeLoad] !== 'true'; i += 1) await new Promise((r) => setTimeout(r, 1));
  api.cordon('node-a');
  api.annotate('node-a', { [keys.waitForSafeLoad]: null });
}

function run(api: InMemoryNodeApi, tree: string, modules: string[], signal: AbortSignal) {
  const { logger, lines } = captureLogger();
  const promise = runSafeLoadGate(
    { nodeName: 'node-a', annotationKey: keys.waitForSafeLoad, stateLabelKey: keys.upgradeState, preflightModules: modules },
    { api, readModule: (name) => readLoadedModule(join(FIXTURES, tree), name), signal, clock: systemClock, logger },
  );
  return { promise, lines };
}

describe('runSafeLoadGate (in-memory API server, fixture /sys/module)', () => {
  it('marks the node, waits for the coordinator, then passes the pre-flight', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a');
    const { promise, lines } = run(api, 'kernel-holders-only', ['nvidia_uvm', 'nvidia'], new AbortController().signal);
    await coordinatorClears(api);
    await expect(promise).resolves.toMatchObject({ preflight: 'passed' });
    expect(lines.filter((l) => l.level !== 'debug').map((l) => l.msg)).toEqual([
      'node marked: waiting for safe load',
      'safe-load annotation cleared',
      'pre-flight passed: no module to be replaced has users outside the kernel',
    ]);
  });

  it('with the pre-flight off, does not look at modules', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a');
    const { promise } = run(api, 'userspace-user', [], new AbortController().signal);
    await coordinatorClears(api);
    await expect(promise).resolves.toMatchObject({ preflight: 'off' });
  });

  it('refuses when a module to be replaced still has a userspace user at the timeout', async () => {
    const api = new InMemoryNodeApi();
    api.addNode('node-a');
    const { promise } = run(api, 'userspace-user', ['nvidia'], AbortSignal.timeout(300));
    await coordinatorClears(api);
    await expect(promise).rejects.toBeInstanceOf(ModulesInUseError);
  });
});
