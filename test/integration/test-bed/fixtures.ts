import { randomBytes } from 'node:crypto';

/** A label value unique to one test, for nodes and the DaemonSets that target them. */
export function uniqueTestId(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`;
}

export const TEST_NODE_LABEL = 'driver-rollout.test/id';
