import type { ConfigProblem } from '../shared/errors.ts';

/** `--kernel simulated` without a simulated kernel wired in: production's entry point. */
export const SIMULATED_KERNEL_UNAVAILABLE: ConfigProblem = {
  path: '--kernel / KERNEL_ADAPTER',
  message: 'simulated is a test double: only test/doubles/simulated-agent-main.ts (tests, demo) provides it',
};
