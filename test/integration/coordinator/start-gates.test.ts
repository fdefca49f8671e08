import type { V1Node } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { useRolloutWorlds, type RolloutWorld } from './harness.ts';
import { oneNodeWorld } from './one-node-world.ts';

// Issue 35's start gates on the real control plane (KWOK driver pods, the coordinator in this
// process): pacing between starts, the soak after an upgrade, a maintenance window. Each holds a
// node with its reason, and the node starts when the hold ends with nothing else changed in the
// cluster: the coordinator wakes itself. Their state is read from the nodes' annotations.

const worlds = useRolloutWorlds({ beforeAll, afterEach });

/** Bounds on waits only catch a hang: a loaded machine may take minutes. */
const HANG_MS = 150_000;
/** Long enough that the bump that follows the planted start is seen within it on a loaded machine. */
const DELAY_S = 20;

const annotation = (n: V1Node | undefined, key: string): string | undefined => n?.metadata?.annotations?.[key];
const unixSeconds = (n: V1Node | undefined, key: string): number => Number(annotation(n, key) ?? Number.NaN);
const byName = (nodes: readonly V1Node[], name: string): V1Node | undefined => nodes.find((n) => n.metadata?.name === name);

async function annotate(world: RolloutWorld, node: string, annotations: Record<string, string>): Promise<void> {
  await world.core.patchNode({ name: node, body: { metadata: { annotations } } }, MERGE_PATCH);
}

/** Waits until `node` waits with a reason starting `prefix`; returns that reason. */
async function heldWith(world: RolloutWorld, node: string, prefix: string): Promise<string> {
  return world.waitForNodes(`${node} held: ${prefix}`, (nodes) => {
    const reason = annotation(byName(nodes, node), world.keys.upgradeReason) ?? '';
    return world.stateOf(byName(nodes, node) ?? {}) === 'upgrade-required' && reason.startsWith(prefix) ? reason : undefined;
  }, HANG_MS);
}

/** Waits until `node` has started (its upgrade-start-time written) and returns when it started (unix seconds). */
async function startedAt(world: RolloutWorld, node: string): Promise<number> {
  return world.waitForNodes(`${node} started`, (nodes) => {
    const at = unixSeconds(byName(nodes, node), world.keys.upgradeStartTime);
    return Number.isFinite(at) ? at : undefined;
  }, HANG_MS);
}

describe('start gates with wake-up timers, real control plane', () => {
  it('minSecondsBetweenStarts: a start recorded on the node holds the next one, which starts when the delay ends with nothing else changed', async () => {
    const { world, node } = await oneNode('pace');
    await world.createRollout({ upgradePolicy: { minSecondsBetweenStarts: DELAY_S } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    // As a start a leader before this one recorded: the pace is read from the node.
    const planted = Math.floor(Date.now() / 1000);
    await annotate(world, node, { [world.keys.lastStartTime]: String(planted) });
    await world.bumpDriver('driver:v2');

    const reason = `pacing: pool default starts a node at most every ${DELAY_S}s (minSecondsBetweenStarts)`;
    expect(await heldWith(world, node, 'pacing:')).toBe(reason);
    const status = await world.waitForStatus('the node waiting for the pace', (s) => JSON.stringify(s.waiting ?? []).includes('minSecondsBetweenStarts'), HANG_MS);
    expect(status.waiting).toEqual([{ node, state: 'upgrade-required', reason }]);
    // Nothing is changed from here on: the start comes from the coordinator's own timer.
    const started = await startedAt(world, node);
    expect(started).toBeGreaterThanOrEqual(planted + DELAY_S);
    // Woken by its own timer, the coordinator starts the node within a pass and a patch of the
    // delay's end. Without that timer only some other event wakes it: in a run with the timer
    // taken out, an informer's relist about two minutes later (KWOK's node heartbeat comes every
    // ten minutes). The bound tells the two apart.
    expect(started - (planted + DELAY_S)).toBeLessThanOrEqual(60);
    const [after] = await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    expect(unixSeconds(after, world.keys.lastStartTime)).toBe(started);
  });

  it('soakSecondsAfterUpgrade: a node done keeps its parallel slot for the soak, uncordoned, and the next node starts when it ends', async () => {
    const world = worlds.create('soak');
    await world.setUp([{}, {}]);
    await world.createDriver('driver:v1');
    const [first = '', second = ''] = world.nodeNames;
    await world.createRollout({ upgradePolicy: { maxParallelUpgrades: 1, maxUnavailable: 1, soakSecondsAfterUpgrade: 6 } });
    await world.startCoordinator();
    await world.waitForStates({ [first]: 'upgrade-done', [second]: 'upgrade-done' });
    await world.bumpDriver('driver:v2');

    const soaking = await world.waitForNodes('one node done and soaking, the other held by the soak', (nodes) => {
      const done = nodes.find((n) => world.stateOf(n) === 'upgrade-done' && annotation(n, world.keys.upgradeDoneTime) !== undefined);
      const held = nodes.find((n) => (annotation(n, world.keys.upgradeReason) ?? '').startsWith('pacing: upgraded nodes'));
      return done !== undefined && held !== undefined ? { done, held: held.metadata?.name ?? '' } : undefined;
    }, HANG_MS);
    expect(soaking.done.spec?.unschedulable).not.toBe(true);
    expect(annotation(byName(await world.nodes(), soaking.held), world.keys.upgradeReason)).toBe('pacing: upgraded nodes in pool default soak 6s before their slot is handed on (soakSecondsAfterUpgrade)');
    const started = await startedAt(world, soaking.held);
    expect(started).toBeGreaterThanOrEqual(unixSeconds(soaking.done, world.keys.upgradeDoneTime) + 6);
    await world.waitForStates({ [first]: 'upgrade-done', [second]: 'upgrade-done' }, HANG_MS);
  });

  it('maintenanceWindows: outside the window the node waits naming the next opening, in the status too, and starts when the window opens with nothing else changed', async () => {
    const { world, node } = await oneNode('window');
    await world.createRollout({});
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    // A window from the next whole minute (at least 10 s away) for ten minutes, on Berlin's clock.
    const opening = Math.ceil((Date.now() + 10_000) / 60_000) * 60_000;
    const window = { start: berlinClock(opening), end: berlinClock(opening + 600_000), timeZone: 'Europe/Berlin' };
    await world.custom.patchNamespacedCustomObject(
      { group: 'driverrollout.io', version: 'v1alpha1', plural: 'driverrollouts', namespace: world.ns.name, name: 'driver', body: { spec: { upgradePolicy: { maintenanceWindows: [window] } } } },
      MERGE_PATCH,
    );
    await world.waitForStatus('the window closed', (s) => (s.maintenanceWindow as { open?: boolean } | undefined)?.open === false, HANG_MS);
    await world.bumpDriver('driver:v2');

    const nextOpening = new Date(opening).toISOString().replace('.000Z', 'Z');
    expect(await heldWith(world, node, 'outside maintenance window')).toMatch(new RegExp(`^outside maintenance window: next opening ${nextOpening} \\(\\d{4}-\\d\\d-\\d\\dT${window.start}:00 Europe/Berlin\\)$`));
    const closed = await world.waitForStatus('the next opening in the status', (s) => (s.maintenanceWindow as { nextOpening?: string } | undefined)?.nextOpening === nextOpening, HANG_MS);
    expect(closed.maintenanceWindow).toMatchObject({ open: false, closesAt: '', nextOpening, nextWindow: expect.stringContaining(`daily ${window.start}-${window.end} Europe/Berlin`) as unknown });
    // Nothing is changed from here on: the start comes from the coordinator's own timer at the opening.
    const started = await startedAt(world, node);
    expect(started * 1000).toBeGreaterThanOrEqual(opening);
    await world.waitForStates({ [node]: 'upgrade-done' }, HANG_MS);
    const open = await world.waitForStatus('the window open', (s) => (s.maintenanceWindow as { open?: boolean } | undefined)?.open === true, HANG_MS);
    expect(open.maintenanceWindow).toMatchObject({ closesAt: new Date(opening + 600_000).toISOString().replace('.000Z', 'Z') });
  });
});

const oneNode = (prefix: string): Promise<{ world: RolloutWorld; node: string }> => oneNodeWorld((p) => worlds.create(p), prefix);

/** `HH:MM` of the instant on Berlin's wall clock. */
function berlinClock(ms: number): string {
  return new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(ms);
}
