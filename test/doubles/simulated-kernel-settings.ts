import { z } from 'zod';
import { parseSettings } from '../../shared/config/parse-settings.ts';
import { flagsOf, problemOf, type SettingsTable } from '../../shared/config/settings-table.ts';
import { ConfigError, type ConfigProblem } from '../../shared/errors.ts';

/** How the simulated kernel behaves (`--kernel simulated` through simulated-agent-main.ts only). */
export interface SimulatedKernelSettings {
  /** `uname -r` of the simulated kernel (default: the target kernel); another release makes modprobe fail (ENOEXEC). */
  readonly kernelRelease: string | undefined;
  /** Time each module's init takes, as a real GPU driver's does. */
  readonly loadMs: number;
  /** Modules whose init fails, with the errno text modprobe prints (`drsample_core:No such device`). */
  readonly initFailures: Readonly<Record<string, string>>;
  /** The node's /dev for the simulated kernel's device files: processes holding one open pin its module. */
  readonly deviceDir: string | undefined;
}

/** The test double's own settings, in the programs' one table shape (`--simulated-load-seconds` / `SIMULATED_LOAD_SECONDS`, ...). */
export const SIMULATED_KERNEL_SETTINGS = {
  source: 'simulated kernel configuration',
  settings: {
    'simulated-kernel-release': z.string().optional(),
    'simulated-load-seconds': z.coerce.number().min(0).default(0),
    'simulated-init-failure': z.string().optional(),
    'simulated-device-dir': z.string().optional(),
  },
} as const satisfies SettingsTable;

/**
 * Takes the `--simulated-*` flags (`--flag value` or `--flag=value`) out of `argv`, reads them, else
 * their variables, and returns the settings and the agent's own arguments. Throws ConfigError
 * listing every problem.
 */
export function parseSimulatedKernelSettings(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): { readonly settings: SimulatedKernelSettings; readonly agentArgv: string[] } {
  const ours = new Set(flagsOf(SIMULATED_KERNEL_SETTINGS).map((f) => `--${f}`));
  const simulatedArgv: string[] = [];
  const agentArgv: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    const name = arg.split('=', 1)[0] ?? '';
    if (!ours.has(name)) agentArgv.push(arg);
    else if (arg.includes('=')) simulatedArgv.push(arg);
    else simulatedArgv.push(arg, ...(argv[i + 1] === undefined ? [] : [argv[(i += 1)] ?? '']));
  }
  const { values: c, problems } = parseSettings(SIMULATED_KERNEL_SETTINGS, simulatedArgv, env);
  const settings: SimulatedKernelSettings = {
    kernelRelease: c['simulated-kernel-release'],
    loadMs: c['simulated-load-seconds'] * 1000,
    initFailures: initFailures(c['simulated-init-failure'], problems),
    deviceDir: c['simulated-device-dir'],
  };
  if (problems.length > 0) throw new ConfigError(SIMULATED_KERNEL_SETTINGS.source, problems);
  return { settings, agentArgv };
}

/** `module:errno text` items separated by commas. */
function initFailures(text: string | undefined, problems: ConfigProblem[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of (text ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^([A-Za-z0-9_-]+):(.+)$/.exec(item);
    if (m?.[1] === undefined || m[2] === undefined) {
      problems.push(problemOf(SIMULATED_KERNEL_SETTINGS, 'simulated-init-failure', `"${item}" is not module:errno text`));
      continue;
    }
    out[m[1]] = m[2].trim();
  }
  return out;
}
