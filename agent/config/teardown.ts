import { z } from 'zod';
import type { ConfigProblem } from '../../shared/errors.ts';
import { parseHolderCommands, type HolderCommand } from '../teardown/holder-command.ts';
import { HOST_NAMESPACES_PREFIX } from '../teardown/run-holder-command.ts';
import { optional, problem, splitList } from './flag-fields.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/** What is taken down around an unload and put back after the load (agent/teardown). */
export interface TeardownConfig {
  /** Host daemons and other holders, stopped before the unload and started after the load. */
  readonly holders: readonly HolderCommand[];
  /** The argv prefix of a holder `on: host` (default nsenter into PID 1's namespaces). */
  readonly hostCommandPrefix: readonly string[];
  /** Remove the SR-IOV VFs of the PFs the driver serves before the unload; re-create them after. */
  readonly sriovTeardown: boolean;
  /** Drivers whose bindings to the driver's functions (and their VFs) are removed and restored. */
  readonly unbindDrivers: readonly string[];
  /** Where VFIO group devices are (a VF whose group device is open is in use). */
  readonly vfioDir: string;
}

export const teardownFlags = {
  'stop-before-unload': optional,
  'host-command-prefix': optional,
  'sriov-teardown': z.stringbool().default(true),
  'unbind-drivers': z.string().default('vfio-pci'),
  'vfio-dir': z.string().default('/dev/vfio'),
};

const driverName = /^[A-Za-z0-9_.-]+$/;

export function teardownConfig(c: RawAgentConfig, problems: ConfigProblem[]): TeardownConfig {
  let holders: HolderCommand[] = [];
  const text = c['stop-before-unload'];
  if (text !== undefined) {
    const parsed = parseHolderCommands(text);
    holders = parsed.holders;
    for (const p of parsed.problems) problems.push(problem('stop-before-unload', `${p.path === '' ? '' : `${p.path}: `}${p.message}`));
  }
  const unbindDrivers = splitList(c['unbind-drivers']);
  const bad = unbindDrivers.filter((d) => !driverName.test(d));
  if (bad.length > 0) problems.push(problem('unbind-drivers', `not driver names: ${bad.join(', ')}`));
  const prefix = c['host-command-prefix'];
  return {
    holders,
    hostCommandPrefix: prefix === undefined ? HOST_NAMESPACES_PREFIX : prefix.split(/\s+/).filter((s) => s !== ''),
    sriovTeardown: c['sriov-teardown'],
    unbindDrivers,
    vfioDir: c['vfio-dir'],
  };
}
