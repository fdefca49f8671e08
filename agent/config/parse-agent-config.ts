import { parseSettings, type SettingValues } from '../../shared/config/parse-settings.ts';
import { environmentVariables, settingLabels, type SettingsTable } from '../../shared/config/settings-table.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { AgentConfig } from './agent-config.ts';
import { buildConfig, buildFlags } from './build.ts';
import { driverRootConfig, driverRootFlags } from './driver-root.ts';
import { AGENT_ENV_NAMES } from './flag-fields.ts';
import { identityConfig, identityFlags } from './identity.ts';
import { kernelConfig, kernelFlags } from './kernel.ts';
import { reportingConfig, reportingFlags } from './reporting.ts';
import { teardownConfig, teardownFlags } from './teardown.ts';

/** The agent's settings, by group (identity, build, kernel, teardown, driver root, reporting): shared/config's one table shape. */
const AGENT_SETTINGS = {
  source: 'agent configuration',
  settings: { ...identityFlags, ...buildFlags, ...kernelFlags, ...teardownFlags, ...driverRootFlags, ...reportingFlags },
  envNames: AGENT_ENV_NAMES,
} satisfies SettingsTable;

/** The flags' values after parsing, every field typed by its schema (defaults applied). */
export type RawAgentConfig = SettingValues<typeof AGENT_SETTINGS.settings>;

/** Every environment variable the agent reads (manifests are checked against this list). */
export function agentEnvironmentVariables(): string[] {
  return environmentVariables(AGENT_SETTINGS);
}

/** Every setting as `--flag / VARIABLE`, for `--help`. */
export function agentSettings(): string[] {
  return settingLabels(AGENT_SETTINGS);
}

/**
 * Parses flags and environment into the agent's config, or throws ConfigError listing every
 * problem (each named by its flag and variable), the checks across fields included (they see a
 * failed field at its default). Nothing is half-applied.
 */
export function parseAgentConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): AgentConfig {
  const { values: raw, problems } = parseSettings(AGENT_SETTINGS, argv, env);
  const config: AgentConfig = {
    ...identityConfig(raw, problems),
    ...buildConfig(raw, problems),
    ...kernelConfig(raw, problems),
    ...teardownConfig(raw, problems),
    ...driverRootConfig(raw, problems),
    ...reportingConfig(raw),
  };
  if (problems.length > 0) throw new ConfigError(AGENT_SETTINGS.source, problems);
  return config;
}
