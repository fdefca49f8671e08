import type { KubeConfig, V1Node } from '@kubernetes/client-node';
import type { CoordinatorProcess } from '../integration/coordinator/coordinator-process.ts';
import { TEST_NODE_LABEL, type RolloutWorld } from '../integration/coordinator/harness.ts';
import { readRollout } from '../observer/rollout-promises.ts';
import { watchPromises, type PromiseWatch } from './watch-promises.ts';

/** A DriverRollout's spec as the chaos run writes it. */
export type ReleaseSpec = Parameters<RolloutWorld['createRollout']>[0];

/** Waits for the end of a world's rollout on `image` (run-scenario.ts waitForEnd). */
export type WaitForEnd = (world: RolloutWorld, image: string, deadline: () => number, blocked: (nodes: readonly V1Node[]) => Set<string>, log: (line: string) => void) => Promise<void>;

/** A node at the end of a run, in one release's driver. */
export interface ReleaseEnd {
  readonly node: string;
  readonly state: string;
  readonly reason: string;
}

/** Coordinator identities of the second release start with this. */
export const SECOND_RELEASE_IDENTITY = 'chaos-b-';

/**
 * The chaos run's second chart release (two-releases), or none (`NO_SECOND_RELEASE`): a
 * namespace, driver, DaemonSet on the same nodes, DriverRollout and coordinator of its own, as a
 * second `helm install` for another driver runs them, with an observer of its own. Both
 * coordinators then share the nodes' cordons (cordon holders).
 */
export interface SecondRelease {
  /** Its driver v1 installed on every node, its DriverRollout created, its coordinator started. */
  install(startCoordinator: (release: RolloutWorld) => void, log: (line: string) => void): Promise<void>;
  installed(): Promise<void>;
  /** Its observer watching, its driver bumped to v2. */
  upgrade(kc: KubeConfig): Promise<void>;
  /** Its rollout's end, as a list to wait for with the first release's (empty for none). */
  ends(waitForEnd: WaitForEnd, deadline: () => number, log: (line: string) => void): Promise<void>[];
  /** What its faults need: its world and observer; undefined for none. */
  readonly faultView: { readonly world: RolloutWorld; readonly watch: PromiseWatch } | undefined;
  /** Starts a coordinator of its release when none runs (a killed one must have a successor). */
  keepCoordinator(coordinators: readonly CoordinatorProcess[], startCoordinator: (release: RolloutWorld) => void): void;
  /** Its observer's violations and its rollout's end, each named as the second release's. */
  violations(): Promise<string[]>;
  checks(): number;
  /** Its nodes at the end, as the run's result has them (none: nothing). */
  final(): Promise<{ readonly secondFinal?: readonly ReleaseEnd[] }>;
  stop(): void;
  tearDown(): Promise<void>;
}

export const NO_SECOND_RELEASE: SecondRelease = {
  install: () => Promise.resolve(),
  installed: () => Promise.resolve(),
  upgrade: () => Promise.resolve(),
  ends: () => [],
  faultView: undefined,
  keepCoordinator: () => undefined,
  violations: () => Promise.resolve([]),
  checks: () => 0,
  final: () => Promise.resolve({}),
  stop: () => undefined,
  tearDown: () => Promise.resolve(),
};

/** The observer of `world`'s rollout of `spec`: its nodes, and its own namespace's pods. */
export function watchWorldPromises(kc: KubeConfig, world: RolloutWorld, spec: ReleaseSpec): Promise<PromiseWatch> {
  return watchPromises({
    kc,
    nodeSelector: `${TEST_NODE_LABEL}=${world.id}`,
    podNamespaces: [world.ns.name],
    rollout: readRollout({ driverName: world.driver, ...spec }),
    driverDaemonSets: ['driver'],
  });
}

/** The second release beside `first`'s world, with `spec` (its own operand label: the operands on the nodes are the first driver's to pause). */
export async function secondReleaseBeside(first: RolloutWorld, spec: ReleaseSpec): Promise<SecondRelease> {
  const world = await first.beside('chaos-b');
  const own: ReleaseSpec = { ...spec, upgradePolicy: { ...spec.upgradePolicy, clients: { operandLabels: ['example.com/chaos-operand-b'], timeoutSeconds: 60 } } };
  let watch: PromiseWatch | undefined;
  const observer = (): PromiseWatch => {
    if (watch === undefined) throw new Error('the second release is not upgrading yet');
    return watch;
  };
  return {
    install: async (startCoordinator, log) => {
      await world.createDriver('driver:v1');
      await world.createRollout(own);
      log(`  second release ${world.ns.name}: driver ${world.driver}, spec ${JSON.stringify(own.upgradePolicy)} pools a=${String(own.pools?.[0]?.maxUnavailable)} b=${String(own.pools?.[1]?.maxUnavailable)}`);
      startCoordinator(world);
    },
    installed: async () => {
      await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), 180_000);
    },
    upgrade: async (kc) => {
      // Its own namespace's pods: the workloads and operands are the first release's observer's to
      // judge (the second evicts the same device pods under the same rules; the operands are the first's).
      watch = await watchWorldPromises(kc, world, own);
      await world.bumpDriver('driver:v2');
    },
    ends: (waitForEnd, deadline, log) => [waitForEnd(world, 'driver:v2', deadline, (nodes) => observer().blocked(nodes), (line) => { log(`  second${line}`); })],
    get faultView() {
      return watch === undefined ? undefined : { world, watch };
    },
    keepCoordinator: (coordinators, startCoordinator) => {
      if (!coordinators.some((c) => c.isRunning() && c.identity.startsWith(SECOND_RELEASE_IDENTITY))) startCoordinator(world);
    },
    violations: async () => [...observer().violations, ...(await observer().checkSettled())].map((v) => `second release: ${v}`),
    checks: () => watch?.checks() ?? 0,
    final: async () => ({ secondFinal: (await world.nodes()).map((n) => ({ node: n.metadata?.name ?? '', state: world.stateOf(n), reason: n.metadata?.annotations?.[world.keys.upgradeReason] ?? '' })) }),
    stop: () => watch?.stop(),
    tearDown: () => world.tearDown(),
  };
}
