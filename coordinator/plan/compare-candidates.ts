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
}

const NUMBER = /^-?\d+(\.\d+)?$/;

export function compareCandidates(a: Candidate, b: Candidate): number {
  if (a.deviceIdle !== b.deviceIdle) return a.deviceIdle ? -1 : 1;
  const byPriority = comparePriority(a.priority, b.priority);
  if (byPriority !== 0) return byPriority;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

function comparePriority(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  const an = NUMBER.test(a);
  const bn = NUMBER.test(b);
  if (an && bn) return Number(a) - Number(b) || (a < b ? -1 : 1);
  if (an !== bn) return an ? -1 : 1;
  return a < b ? -1 : 1;
}
