import { z } from 'zod';
import { envNameOf, settingLabel, type SettingsTable } from '../../shared/config/settings-table.ts';
import type { ConfigProblem } from '../../shared/errors.ts';
import { splitList } from '../../shared/driver-identity.ts';

/**
 * Every setting is a flag and an environment variable, by the programs' one rule
 * (shared/config/settings-table.ts): `--node-name` and `NODE_NAME`, and so on (the DaemonSet uses
 * variables, the demo flags). Flags win. The few whose variable differs from the flag name are
 * listed here.
 */
export const AGENT_ENV_NAMES: Readonly<Record<string, string>> = {
  kernel: 'KERNEL_ADAPTER',
  modules: 'DRIVER_MODULES',
  blacklist: 'MODULE_BLACKLIST',
  'signing-key': 'SIGNING_KEY_PATH',
  'signing-cert': 'SIGNING_CERT_PATH',
};

/** The naming of the agent's settings, for the groups' problems (the settings themselves: parse-agent-config.ts). */
const NAMING: SettingsTable = { source: 'agent configuration', settings: {}, envNames: AGENT_ENV_NAMES };

/** The environment variable of a flag: `node-name` → `NODE_NAME`, `kernel` → `KERNEL_ADAPTER`. */
export function envName(flag: string): string {
  return envNameOf(NAMING, flag);
}

/** A problem named by its flag and its variable: `--node-name / NODE_NAME`. */
export function problem(flag: string, message: string): ConfigProblem {
  return { path: settingLabel(NAMING, flag), message };
}

export const required = z.string({ error: 'required' }).min(1, 'required');
export const optional = z.string().optional();
export const seconds = z.coerce.number().positive();

export { splitList } from '../../shared/driver-identity.ts';

/** Absolute paths separated by spaces or commas; a relative one is a problem named by its flag. */
export function absolutePathList(text: string | undefined, flag: string, problems: ConfigProblem[]): string[] {
  const paths = splitList(text ?? '');
  const bad = paths.filter((p) => !p.startsWith('/'));
  if (bad.length > 0) problems.push(problem(flag, `not absolute paths: ${bad.join(', ')}`));
  return paths;
}
