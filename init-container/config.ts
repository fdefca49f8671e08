import { accessSync, constants } from 'node:fs';
import { isAbsolute } from 'node:path';
import { z } from 'zod';
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

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Every setting: its environment variable and its flag (`--kebab-case`; a flag wins over the variable). */
export const SETTINGS = {
  nodeName: { env: 'NODE_NAME', flag: '--node-name' },
  driverName: { env: 'DRIVER_NAME', flag: '--driver-name' },
  keyDomain: { env: 'KEY_DOMAIN', flag: '--key-domain' },
  safeLoadAnnotation: { env: 'SAFE_LOAD_ANNOTATION', flag: '--safe-load-annotation' },
  safeLoadEnabled: { env: 'SAFE_LOAD_ENABLED', flag: '--safe-load-enabled' },
  waitTimeoutSeconds: { env: 'WAIT_TIMEOUT_SECONDS', flag: '--wait-timeout-seconds' },
  kubeconfig: { env: 'KUBECONFIG', flag: '--kubeconfig' },
  preflightModules: { env: 'PREFLIGHT_MODULES', flag: '--preflight-modules' },
  sysModuleRoot: { env: 'SYS_MODULE_ROOT', flag: '--sys-module-root' },
  logLevel: { env: 'LOG_LEVEL', flag: '--log-level' },
} as const;
type Setting = keyof typeof SETTINGS;

/** Largest timeout a Node timer can hold (2^31-1 ms), in whole seconds. */
const MAX_TIMEOUT_SECONDS = 2_147_483;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const MODULE_NAME = /^[A-Za-z0-9_-]+$/;

const dnsSubdomain = z.string().max(253, { error: 'must be at most 253 characters' }).regex(DNS_SUBDOMAIN, {
  error: 'must be a DNS subdomain (lowercase letters, digits, "-" and ".")',
});

const schema = z
  .object({
    nodeName: z.string({ error: 'required: set it from the downward API (fieldRef spec.nodeName)' }).pipe(dnsSubdomain),
    driverName: z
      .string()
      .max(63, { error: 'must be at most 63 characters' })
      .regex(DNS_LABEL, { error: 'must be a DNS label such as "gpu" or "ofed" (lowercase letters, digits, "-")' })
      .optional(),
    keyDomain: dnsSubdomain.default(DEFAULT_KEY_DOMAIN),
    safeLoadAnnotation: z
      .string()
      .refine(isQualifiedName, { error: 'must be a Kubernetes annotation key ([prefix/]name, name at most 63 characters)' })
      .optional(),
    safeLoadEnabled: z
      .enum(['true', 'false'], { error: 'must be "true" or "false"' })
      .default('false')
      .transform((v) => v === 'true'),
    waitTimeoutSeconds: z
      .string()
      .regex(/^\d+$/, { error: 'must be a whole number of seconds (0 = wait forever)' })
      .transform(Number)
      .pipe(z.number().max(MAX_TIMEOUT_SECONDS, { error: `must be at most ${MAX_TIMEOUT_SECONDS} (about 24 days); use 0 to wait forever` }))
      .default(0),
    kubeconfig: z.string().min(1, { error: 'must not be empty (unset it to use the in-cluster service account)' }).optional(),
    preflightModules: z
      .string()
      .transform(splitList)
      .pipe(z.array(z.string().regex(MODULE_NAME, { error: 'each module name must be letters, digits, "_" or "-"' })))
      .default([]),
    sysModuleRoot: z.string().refine(isAbsolute, { error: 'must be an absolute path' }).default('/sys/module'),
    logLevel: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
  })
  .superRefine((c, ctx) => {
    if (c.safeLoadAnnotation === undefined && c.driverName === undefined) {
      ctx.addIssue({ code: 'custom', path: ['driverName'], message: 'required unless SAFE_LOAD_ANNOTATION is set: the annotation key is computed from it' });
    }
    // Only a well-formed driver and domain can make a key too long; other problems are reported on their own field.
    const wellFormed = c.driverName !== undefined && DNS_LABEL.test(c.driverName) && DNS_SUBDOMAIN.test(c.keyDomain);
    if (c.safeLoadAnnotation === undefined && wellFormed && !isQualifiedName(driverKeys(c.driverName ?? '', c.keyDomain).waitForSafeLoad)) {
      ctx.addIssue({
        code: 'custom',
        path: ['driverName'],
        message: `too long: the annotation key ${driverKeys(c.driverName ?? '', c.keyDomain).waitForSafeLoad} is not a valid key (name part at most 63 characters)`,
      });
    }
  });

/**
 * Reads flags (`--name value` or `--name=value`) and environment variables, validates all of them
 * at once and throws a ConfigError listing every problem with its field (the flag or the
 * variable it came from). `env` is process.env in production; tests pass their own.
 */
export function parseInitConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): InitConfig {
  const flags = parseFlags(argv);
  const problems: ConfigProblem[] = [...flags.problems];
  const raw: Partial<Record<Setting, string>> = {};
  const source: Partial<Record<Setting, string>> = {};
  for (const setting of Object.keys(SETTINGS) as Setting[]) {
    const { env: variable, flag } = SETTINGS[setting];
    const fromFlag = flags.values.get(flag);
    const fromEnv = env[variable];
    // An empty variable counts as unset: Kubernetes manifests often template `value: ""`.
    if (fromFlag !== undefined) {
      raw[setting] = fromFlag;
      source[setting] = flag;
    } else if (fromEnv !== undefined && fromEnv !== '') {
      raw[setting] = fromEnv;
      source[setting] = variable;
    }
  }
  const result = schema.safeParse(raw);
  if (!result.success) {
    for (const issue of result.error.issues) {
      const setting = issue.path[0] as Setting;
      problems.push({ path: source[setting] ?? `${SETTINGS[setting].env} (or ${SETTINGS[setting].flag})`, message: issue.message });
    }
  }
  if (result.success) problems.push(...credentialProblems(result.data, source, env));
  if (problems.length > 0 || !result.success) throw new ConfigError('init-container configuration', problems);
  const c = result.data;
  const keys = c.driverName === undefined ? undefined : driverKeys(c.driverName, c.keyDomain);
  return {
    nodeName: c.nodeName,
    safeLoadEnabled: c.safeLoadEnabled,
    annotationKey: c.safeLoadAnnotation ?? (keys as NonNullable<typeof keys>).waitForSafeLoad,
    stateLabelKey: keys?.upgradeState,
    waitTimeoutSeconds: c.waitTimeoutSeconds,
    kubeconfig: c.kubeconfig,
    preflightModules: c.preflightModules,
    sysModuleRoot: c.sysModuleRoot,
    logLevel: c.logLevel,
  };
}

/** Credentials are checked up front too, so a bad path is reported with everything else. */
function credentialProblems(
  c: { safeLoadEnabled: boolean; kubeconfig?: string | undefined },
  source: Partial<Record<Setting, string>>,
  env: Readonly<Record<string, string | undefined>>,
): ConfigProblem[] {
  if (!c.safeLoadEnabled) return [];
  if (c.kubeconfig !== undefined) {
    try {
      accessSync(c.kubeconfig, constants.R_OK);
      return [];
    } catch {
      return [{ path: source.kubeconfig ?? SETTINGS.kubeconfig.env, message: `cannot read kubeconfig file ${c.kubeconfig}` }];
    }
  }
  if ((env.KUBERNETES_SERVICE_HOST ?? '') === '') {
    return [
      {
        path: `${SETTINGS.kubeconfig.env} (or ${SETTINGS.kubeconfig.flag})`,
        message: 'required outside a pod: KUBERNETES_SERVICE_HOST is unset, so in-cluster credentials are not available',
      },
    ];
  }
  return [];
}

const KNOWN_FLAGS = new Set<string>(Object.values(SETTINGS).map((s) => s.flag));

function parseFlags(argv: readonly string[]): { values: Map<string, string>; problems: ConfigProblem[] } {
  const values = new Map<string, string>();
  const problems: ConfigProblem[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (!name.startsWith('--')) {
      problems.push({ path: arg, message: 'unexpected argument: settings are flags such as --node-name=<name>' });
      continue;
    }
    if (!KNOWN_FLAGS.has(name)) {
      problems.push({ path: name, message: `unknown flag; known flags: ${[...KNOWN_FLAGS].join(', ')}` });
      continue;
    }
    if (eq !== -1) {
      values.set(name, arg.slice(eq + 1));
      continue;
    }
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) {
      problems.push({ path: name, message: 'needs a value' });
      continue;
    }
    values.set(name, next);
    i += 1;
  }
  return { values, problems };
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A Kubernetes label/annotation key: `[DNS-subdomain-prefix/]name`, name at most 63 characters. */
export function isQualifiedName(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && QUALIFIED_NAME_PART.test(name);
}
