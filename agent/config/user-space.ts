import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';
import { optional, problem } from './flag-fields.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/** The driver's user space (agent/user-space) and the daemons run from it (agent/daemons). */
export interface UserSpaceConfig {
  /**
   * A root holding the driver's user space (`usr/lib/...`, `usr/bin/...`; the image's `/` in the
   * NVIDIA images). Set: before every load the version guard compares it with the modules
   * (UserSpaceMismatch), and after a verified load the daemons it carries run beside the driver.
   */
  readonly userSpaceRoot: string | undefined;
  /** Where the daemons write their pid files. */
  readonly daemonRunDir: string;
}

export const userSpaceFlags = {
  'user-space-root': optional,
  'daemon-run-dir': z.string().default('/var/run'),
};

export function userSpaceConfig(c: RawAgentConfig, problems: ConfigProblem[]): UserSpaceConfig {
  const root = c['user-space-root'];
  if (root !== undefined && !root.startsWith('/')) problems.push(problem('user-space-root', `not an absolute path: ${root}`));
  if (!c['daemon-run-dir'].startsWith('/')) problems.push(problem('daemon-run-dir', `not an absolute path: ${c['daemon-run-dir']}`));
  return { userSpaceRoot: root, daemonRunDir: c['daemon-run-dir'] };
}
