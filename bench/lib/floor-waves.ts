/** Waves replaced at once, without the coordinator, to measure the cluster's floor for a wave. */
export const FLOOR_SAMPLES = 3;

/** Nodes whose driver pods the single-replacement samples use, ahead of the floor's waves. */
export const SINGLE_SAMPLES = 3;

/**
 * The node sets whose driver pods the rollout bench replaces at once, with no coordinator
 * running, to sample the cluster's floor for a wave: FLOOR_SAMPLES waves of `allowed` nodes
 * after the SINGLE_SAMPLES nodes the single replacements used; or, where the fleet has no room
 * for them (maxUnavailable near 100 %: the rollout's one wave is about the whole fleet), one wave
 * of `allowed` nodes from the start, sampled once, since a sample then costs as much as the
 * rollout's own wave.
 */
export function floorWaves(names: readonly string[], allowed: number): string[][] {
  if (SINGLE_SAMPLES + FLOOR_SAMPLES * allowed > names.length) return [names.slice(0, allowed)];
  return Array.from({ length: FLOOR_SAMPLES }, (_, i) => names.slice(SINGLE_SAMPLES + i * allowed, SINGLE_SAMPLES + (i + 1) * allowed));
}
