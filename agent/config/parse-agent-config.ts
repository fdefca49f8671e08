import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigError, type ConfigProblem } from '../../shared/errors.ts';
import type { AgentConfig } from './agent-config.ts';
import { buildConfig, buildFlags } from './build.ts';
import { envName, problem } from './flag-fields.ts';
import { identityConfig, identityFlags } from './identity.ts';
import { kernelConfig, kernelFlags } from './kernel.ts';
import { reportingConfig, reportingFlags } from './reporting.ts';
import { teardownConfig, teardownFlags } from './teardown.ts';

const schema = z.object({ ...identityFlags, ...buildFlags, ...kernelFlags, ...teardownFlags, ...reportingFlags });
type Flag = keyof typeof schema.shape;
/** Every flag, each also an environment variable (flag-fields.ts: envName). */
const FLAGS = Object.keys(schema.shape) as Flag[];

/** The flags' values after parsing, every field typed by its schema (defaults applied). */
export type RawAgentConfig = z.infer<typeof schema>;

/** Every environment variable the agent reads (manifests are checked against this list). */
export function agentEnvironmentVariables(): string[] {
  return FLAGS.map(envName);
}

/** Every setting as `--flag / VARIABLE`, for `--help`. */
export function agentSettings(): string[] {
  return FLAGS.map((f) => `--${f} / ${envName(f)}`);
}

/**
 * Parses flags and environment into the agent's config, or throws ConfigError listing every
 * problem (each named by its flag and variable). Nothing is half-applied.
 */
export function parseAgentConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): AgentConfig {
  let flags: Partial<Record<Flag, string | boolean>>;
  try {
    const options = Object.fromEntries(FLAGS.map((f) => [f, { type: 'string' as const }]));
    flags = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigError('agent flags', [{ path: 'argv', message: error instanceof Error ? error.message : String(error) }]);
  }
  const input: Record<string, string | undefined> = {};
  for (const flag of FLAGS) {
    const value = flags[flag] ?? env[envName(flag)];
    input[flag] = typeof value === 'string' && value !== '' ? value : undefined;
  }
  // Fields are parsed one by one so that a bad field does not hide the problems of the others,
  // including the checks across fields (which see a failed field as unset).
  const problems: ConfigProblem[] = [];
  const values: Record<string, unknown> = {};
  for (const flag of FLAGS) {
    const field = schema.shape[flag];
    const result = field.safeParse(input[flag]);
    if (result.success) {
      values[flag] = result.data;
    } else {
      for (const issue of result.error.issues) problems.push(problem(flag, issue.message));
      const fallback = field.safeParse(undefined);
      values[flag] = fallback.success ? fallback.data : '';
    }
  }
  const raw = values as RawAgentConfig;
  const config: AgentConfig = {
    ...identityConfig(raw, problems),
    ...buildConfig(raw, problems),
    ...kernelConfig(raw, problems),
    ...teardownConfig(raw, problems),
    ...reportingConfig(raw),
  };
  if (problems.length > 0) throw new ConfigError('agent configuration', problems);
  return config;
}
