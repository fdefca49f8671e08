import type { ConfigProblem } from '../shared/errors.ts';

/**
 * `--kernel simulated` without a simulated kernel wired in: production's entry point refuses it.
 * (Not named simulated-*.ts: that name marks a test double, which never ships in an image.)
 */
export const NO_SIMULATED_KERNEL: ConfigProblem = {
  path: '--kernel / KERNEL_ADAPTER',
  message: 'simulated is a test double: only test/doubles/simulated-agent-main.ts (tests, demo) provides it',
};
