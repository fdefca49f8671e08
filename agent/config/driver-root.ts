import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';
import { optional, problem, splitList } from './flag-fields.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/**
 * The driver root: the driver's user space in the image, which the version guard (agent/user-space)
 * checks before every load, the daemons (agent/daemons) run from beside a verified driver, and the
 * agent publishes while its modules are loaded (agent/root/).
 */
export interface DriverRootConfig {
  /**
   * The root in the image (`usr/lib/...`, `usr/bin/...`; `/opt/driver-root` in the driver images).
   * None: no version guard, no daemons, nothing published.
   */
  readonly driverRootDir: string | undefined;
  /** Where it is published on the node (a host path mounted with Bidirectional propagation). */
  readonly driverRootPath: string;
  /**
   * NVIDIA's `.driver-ctr-ready`: by default `validations/.driver-ctr-ready` beside the root's
   * path, NVIDIA's layout (`/run/nvidia/driver` → `/run/nvidia/validations/.driver-ctr-ready`).
   */
  readonly driverReadyMarker: string;
  /** Run chrooted in the published root before the marker is written, e.g. `nvidia-smi`; empty: none. */
  readonly driverRootCheck: readonly string[];
  /** Where the daemons of the root write their pid files. */
  readonly daemonRunDir: string;
}

export const driverRootFlags = {
  'driver-root-dir': optional,
  'driver-root-path': z.string().default('/run/nvidia/driver'),
  'driver-ready-marker': optional,
  'driver-root-check': optional,
  'daemon-run-dir': z.string().default('/var/run'),
};

export function driverRootConfig(c: RawAgentConfig, problems: ConfigProblem[]): DriverRootConfig {
  const dir = c['driver-root-dir'];
  for (const flag of ['driver-root-dir', 'driver-root-path', 'driver-ready-marker', 'daemon-run-dir'] as const) {
    const value = c[flag];
    if (value !== undefined && !value.startsWith('/')) problems.push(problem(flag, `must be an absolute path: ${value}`));
  }
  const path = c['driver-root-path'].replace(/\/+$/, '');
  if (dir !== undefined && path === '') problems.push(problem('driver-root-path', 'must not be /'));
  return {
    driverRootDir: dir,
    driverRootPath: path,
    driverReadyMarker: c['driver-ready-marker'] ?? join(dirname(path === '' ? '/' : path), 'validations', '.driver-ctr-ready'),
    driverRootCheck: splitList(c['driver-root-check'] ?? ''),
    daemonRunDir: c['daemon-run-dir'],
  };
}
