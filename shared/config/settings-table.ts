import type { z } from 'zod';
import type { ConfigProblem } from '../errors.ts';

/**
 * A program's settings, in the one shape the three programs share: every setting is a flag
 * (`--node-name`) and an environment variable, the flag in SCREAMING_SNAKE_CASE (`NODE_NAME`)
 * unless `envNames` names another (`namespace` → `WATCH_NAMESPACE`, kept for the chart and for
 * users who set it). A flag wins over its variable; an empty value counts as unset (manifests
 * often template `value: ""`).
 */
export interface SettingsTable<S extends Record<string, z.ZodType> = Record<string, z.ZodType>> {
  /** What the settings configure, for ConfigError: `agent configuration`. */
  readonly source: string;
  /** Every setting by flag name (kebab-case, without `--`): the schema of its value. */
  readonly settings: S;
  /** Variables that are not the flag in SCREAMING_SNAKE_CASE. */
  readonly envNames?: Readonly<Partial<Record<keyof S & string, string>>>;
}

/** The environment variable of a flag: `node-name` → `NODE_NAME` unless the table names another. */
export function envNameOf(table: SettingsTable, flag: string): string {
  return (table.envNames as Readonly<Record<string, string | undefined>> | undefined)?.[flag] ?? flag.toUpperCase().replaceAll('-', '_');
}

/** Every flag of the table. */
export function flagsOf(table: SettingsTable): string[] {
  return Object.keys(table.settings);
}

/** A setting as people see it, in `--help` and in every problem: `--node-name / NODE_NAME`. */
export function settingLabel(table: SettingsTable, flag: string): string {
  return `--${flag} / ${envNameOf(table, flag)}`;
}

/** Every setting as `--flag / VARIABLE`, for `--help`. */
export function settingLabels(table: SettingsTable): string[] {
  return flagsOf(table).map((flag) => settingLabel(table, flag));
}

/** Every environment variable the program reads (manifests are checked against this list). */
export function environmentVariables(table: SettingsTable): string[] {
  return flagsOf(table).map((flag) => envNameOf(table, flag));
}

/** A problem named by its flag and its variable. */
export function problemOf(table: SettingsTable, flag: string, message: string): ConfigProblem {
  return { path: settingLabel(table, flag), message };
}
