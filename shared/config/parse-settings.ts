import type { z } from 'zod';
import type { ConfigProblem } from '../errors.ts';
import { readFlags } from './read-flags.ts';
import { envNameOf, flagsOf, problemOf, type SettingsTable } from './settings-table.ts';

/** Each setting's value after parsing (defaults applied), by flag name. */
export type SettingValues<S extends Record<string, z.ZodType>> = { -readonly [K in keyof S]: z.output<S[K]> };

/**
 * Reads every setting from the flags, else its variable, and parses each on its own, so a bad
 * setting hides no other problem. A setting that fails takes its default (or `''`), so the
 * program's checks across settings still run and add their problems; the program throws
 * ConfigError once, listing all of them (problems are named `--flag / VARIABLE`).
 */
export function parseSettings<S extends Record<string, z.ZodType>>(
  table: SettingsTable<S>,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): { readonly values: SettingValues<S>; readonly problems: ConfigProblem[] } {
  const flags = flagsOf(table);
  const read = readFlags(argv, flags);
  const problems: ConfigProblem[] = [...read.problems];
  const values: Record<string, unknown> = {};
  for (const flag of flags) {
    const given = read.values.get(flag) ?? env[envNameOf(table, flag)];
    const schema = table.settings[flag] as z.ZodType;
    const result = schema.safeParse(given === '' ? undefined : given);
    if (result.success) {
      values[flag] = result.data;
      continue;
    }
    for (const issue of result.error.issues) problems.push(problemOf(table, flag, issue.message));
    const fallback = schema.safeParse(undefined);
    values[flag] = fallback.success ? fallback.data : '';
  }
  return { values: values as SettingValues<S>, problems };
}
