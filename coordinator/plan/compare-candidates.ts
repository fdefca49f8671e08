/**
 * Start order of nodes waiting in upgrade-required: nodes whose device is idle first (nothing to
 * evict, least disruption), then by the optional priority label (numbers ascending, then other
 * values in string order, unlabelled last), then by name. Total and deterministic.
 */
export interface Candidate {
  readonly name: string;
  readonly deviceIdle: boolean;
  /** The priority label's value, or null when the node has none or no label is configured. */
  readonly priority: string | null;
  /** `priority` as a number when it is one (see `priorityNumber`), else null. */
  readonly priorityNumber: number | null;
}

const NUMBER = /^-?\d+(\.\d+)?$/;

/** Parsed once per candidate, not on every comparison. */
export function priorityNumber(priority: string | null): number | null {
  return priority !== null && NUMBER.test(priority) ? Number(priority) : null;
}

export function compareCandidates(a: Candidate, b: Candidate): number {
  if (a.deviceIdle !== b.deviceIdle) return a.deviceIdle ? -1 : 1;
  const byPriority = comparePriority(a, b);
  if (byPriority !== 0) return byPriority;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

function comparePriority(a: Candidate, b: Candidate): number {
  if (a.priority === b.priority) return 0;
  if (a.priority === null) return 1;
  if (b.priority === null) return -1;
  if (a.priorityNumber !== null && b.priorityNumber !== null) return a.priorityNumber - b.priorityNumber || (a.priority < b.priority ? -1 : 1);
  if ((a.priorityNumber === null) !== (b.priorityNumber === null)) return a.priorityNumber !== null ? -1 : 1;
  return a.priority < b.priority ? -1 : 1;
}
