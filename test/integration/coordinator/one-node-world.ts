import type { RolloutWorld } from './harness.ts';

/** A world (from useRolloutWorlds' `create`) with one node and a Ready KWOK driver pod at driver:v1. */
export async function oneNodeWorld(create: (prefix: string) => RolloutWorld, prefix: string): Promise<{ world: RolloutWorld; node: string }> {
  const world = create(prefix);
  await world.setUp([{}]);
  await world.createDriver('driver:v1');
  return { world, node: world.nodeNames[0] ?? '' };
}
