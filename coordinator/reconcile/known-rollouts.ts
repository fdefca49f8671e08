import type { RolloutLabels } from '../metrics/coordinator-metrics.ts';

/**
 * The DriverRollouts that have metrics, so that the series of a deleted one are removed:
 * `startPass`, `seen` for every rollout of the pass, then `forgetUnseen` returns (and forgets) those
 * with metrics that the pass did not see.
 */
export class KnownRollouts {
  readonly #known = new Map<string, RolloutLabels>();
  #seen = new Set<string>();

  /** A pass begins: nothing seen yet. */
  startPass(): void {
    this.#seen = new Set();
  }

  /** A rollout this pass looked at (valid or not). */
  seen(key: string): void {
    this.#seen.add(key);
  }

  /** A rollout whose metrics were set, under these labels. */
  recorded(key: string, labels: RolloutLabels): void {
    this.#known.set(key, labels);
  }

  /** Labels of rollouts with metrics that this pass did not see; they are forgotten here. */
  forgetUnseen(): RolloutLabels[] {
    const gone: RolloutLabels[] = [];
    for (const [key, labels] of this.#known) {
      if (!this.#seen.has(key)) {
        gone.push(labels);
        this.#known.delete(key);
      }
    }
    return gone;
  }
}
