import { accessSync, constants } from 'node:fs';
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { parseSettings, type SettingValues } from '../shared/config/parse-settings.ts';
import { problemOf, settingLabel, settingLabels, type SettingsTable } from '../shared/config/settings-table.ts';
import { dnsLabel, dnsSubdomain, isQualifiedName, logLevel, type LogLevel } from '../shared/config/validators.ts';
import { splitList } from '../shared/driver-identity.ts';
import { ConfigError, type ConfigProblem } from '../shared/errors.ts';
import { DEFAULT_KEY_DOMAIN, driverKeys } from '../shared/keys.ts';

/** The init container's settings, validated. Built only by `parseInitConfig`. */
export interface InitConfig {
  readonly nodeName: string;
  readonly safeLoadEnabled: boolean;
  /** The annotation the gate sets and waits on: SAFE_LOAD_ANNOTATION, else computed from driver and domain. */
  readonly annotationKey: string;
  /** The driver's upgrade-state label, for the status log; undefined when DRIVER_NAME is not given. */
  readonly stateLabelKey: string | undefined;
  /** 0 = wait forever. */
  readonly waitTimeoutSeconds: number;
  /** undefined = in-cluster service account. */
  readonly kubeconfig: string | undefined;
  /** Empty = pre-flight off. */
  readonly preflightModules: readonly string[];
  readonly sysModuleRoot: string;
  readonly logLevel: LogLevel;
}

/** Largest timeout a Node timer can hold (2^31-1 ms), in whole seconds. */
const MAX_TIMEOUT_SECONDS = 2_147_483;

const MODULE_NAME = /^[A-Za-z0-9_-]+$/;

/** The init container's settings (shared/config/settings-table.ts: each a flag and its variable). */
export const INIT_SETTINGS = {
  source: 'init-container configuration',
  settings: {
    'node-name': z.string({ error: 'required: set it from the downward API (fieldRef spec.nodeName)' }).pipe(dnsSubdomain),
    'driver-name': dnsLabel.optional(),
    'key-domain': dnsSubdomain.default(DEFAULT_KEY_DOMAIN),
    'safe-load-annotation': z
      .string()
      .refine(isQualifiedName, { error: 'must be a Kubernetes annotation key ([prefix/]name, name at most 63 characters)' })
      .optional(),
    'safe-load-enabled': z
      .enum(['true', 'false'], { error: 'must be "true" or "false"' })
      .default('false')
      .transform((v) => v === 'true'),
    'wait-timeout-seconds': z
      .string()
      .regex(/^\d+$/, { error: 'must be a whole number of seconds (0 = wait forever)' })
      .transform(Number)
      .pipe(z.number().max(MAX_TIMEOUT_SECONDS, { error: `must be at most ${MAX_TIMEOUT_SECONDS} (about 24 days); use 0 to wait forever` }))
      .default(0),
    kubeconfig: z.string().min(1, { error: 'must not be empty (unset it to use the in-cluster service account)' }).optional(),
    'preflight-modules': z
      .string()
      .transform(splitList)
      .pipe(z.array(z.string().regex(MODULE_NAME, { error: 'each module name must be letters, digits, "_" or "-"' })))
      .default([]),
    'sys-module-root': z.string().refine(isAbsolute, { error: 'must be an absolute path' }).default('/sys/module'),
    'log-level': logLevel,
  },
} as const satisfies SettingsTable;

type InitValues = SettingValues<typeof INIT_SETTINGS.settings>;

/** Every setting as `--flag / VARIABLE`, for `--help`. */
export function initSettings(): string[] {
  return settingLabels(INIT_SETTINGS);
}

/**
 * Reads flags (`--name value` or `--name=value`) and environment variables, validates all of them
 * at once and throws a ConfigError listing every problem, each named `--flag / VARIABLE`. `env` is
 * process.env in production; tests pass their own.
 */
export function parseInitConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): InitConfig {
  const { values: c, problems } = parseSettings(INIT_SETTINGS, argv, env);
  const failed = new Set(problems.map((p) => p.path));
  problems.push(...annotationKeyProblems(c, failed));
  if (problems.length === 0) problems.push(...credentialProblems(c, env));
  if (problems.length > 0) throw new ConfigError(INIT_SETTINGS.source, problems);
  const keys = c['driver-name'] === undefined ? undefined : driverKeys(c['driver-name'], c['key-domain']);
  return {
    nodeName: c['node-name'],
    safeLoadEnabled: c['safe-load-enabled'],
    annotationKey: c['safe-load-annotation'] ?? (keys as NonNullable<typeof keys>).waitForSafeLoad,
    stateLabelKey: keys?.upgradeState,
    waitTimeoutSeconds: c['wait-timeout-seconds'],
    kubeconfig: c.kubeconfig,
    preflightModules: c['preflight-modules'],
    sysModuleRoot: c['sys-module-root'],
    logLevel: c['log-level'],
  };
}

/** The annotation key: given, or computed from a driver name and domain that make a valid key. */
function annotationKeyProblems(c: InitValues, failed: ReadonlySet<string>): ConfigProblem[] {
  if (c['safe-load-annotation'] !== undefined || failed.has(settingLabel(INIT_SETTINGS, 'safe-load-annotation'))) return [];
  // A driver name or domain that failed is reported on its own.
  if (failed.has(settingLabel(INIT_SETTINGS, 'driver-name')) || failed.has(settingLabel(INIT_SETTINGS, 'key-domain'))) return [];
  if (c['driver-name'] === undefined) {
    return [problemOf(INIT_SETTINGS, 'driver-name', 'required unless SAFE_LOAD_ANNOTATION is set: the annotation key is computed from it')];
  }
  const key = driverKeys(c['driver-name'], c['key-domain']).waitForSafeLoad;
  if (isQualifiedName(key)) return [];
  return [problemOf(INIT_SETTINGS, 'driver-name', `too long: the annotation key ${key} is not a valid key (name part at most 63 characters)`)];
}

/** Credentials are checked up front too, so a bad path is reported with everything else. */
function credentialProblems(c: InitValues, env: Readonly<Record<string, string | undefined>>): ConfigProblem[] {
  if (!c['safe-load-enabled']) return [];
  if (c.kubeconfig !== undefined) {
    try {
      accessSync(c.kubeconfig, constants.R_OK);
      return [];
    } catch {
      return [problemOf(INIT_SETTINGS, 'kubeconfig', `cannot read kubeconfig file ${c.kubeconfig}`)];
    }
  }
  if ((env.KUBERNETES_SERVICE_HOST ?? '') === '') {
    return [problemOf(INIT_SETTINGS, 'kubeconfig', 'required outside a pod: KUBERNETES_SERVICE_HOST is unset, so in-cluster credentials are not available')];
  }
  return [];
}
