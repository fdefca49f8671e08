import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ConfigError } from '../shared/errors.ts';

/** Everything the coordinator is told at start-up; parsed once by main.ts. */
export interface CoordinatorConfig {
  /** Path of a kubeconfig; undefined means the pod's service account. */
  readonly kubeconfig: string | undefined;
  /** Namespaces whose DriverRollouts and DaemonSets are watched; empty means all. */
  readonly namespaces: readonly string[];
  readonly leaseName: string;
  readonly leaseNamespace: string;
  /** This replica's name in the Lease (the pod name in a cluster). */
  readonly identity: string;
  readonly leaseDurationSeconds: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** Port of /metrics, /healthz and /readyz; 0 picks a free one. */
  readonly metricsPort: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
}

const FLAGS = {
  kubeconfig: { type: 'string' },
  namespace: { type: 'string' },
  'lease-name': { type: 'string' },
  'lease-namespace': { type: 'string' },
  identity: { type: 'string' },
  'lease-duration-seconds': { type: 'string' },
  'renew-deadline-seconds': { type: 'string' },
  'retry-period-seconds': { type: 'string' },
  'metrics-port': { type: 'string' },
  'log-level': { type: 'string' },
} as const;

const seconds = z.coerce.number().positive();

const schema = z
  .object({
    kubeconfig: z.string().optional(),
    namespaces: z.string().default(''),
    leaseName: z.string().regex(/^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/, 'must be a DNS subdomain').default('driver-rollout-coordinator'),
    leaseNamespace: z.string().min(1).default('default'),
    identity: z.string().min(1).default(`${hostname()}-${process.pid}`),
    leaseDurationSeconds: z.coerce.number().int().positive().default(15),
    renewDeadlineSeconds: seconds.default(10),
    retryPeriodSeconds: seconds.default(2),
    metricsPort: z.coerce.number().int().min(0).max(65535).default(8080),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).default('info'),
  })
  .refine((c) => c.renewDeadlineSeconds < c.leaseDurationSeconds, {
    path: ['renewDeadlineSeconds'],
    message: 'must be below leaseDurationSeconds, or two replicas could write at once',
  })
  .refine((c) => c.retryPeriodSeconds < c.renewDeadlineSeconds, {
    path: ['retryPeriodSeconds'],
    message: 'must be below renewDeadlineSeconds',
  });

/** Which flag or variable each field comes from, for messages and `--help`. */
export const COORDINATOR_SETTINGS: Readonly<Record<string, string>> = {
  kubeconfig: '--kubeconfig / KUBECONFIG',
  namespaces: '--namespace / WATCH_NAMESPACE',
  leaseName: '--lease-name / LEASE_NAME',
  leaseNamespace: '--lease-namespace / POD_NAMESPACE',
  identity: '--identity / POD_NAME',
  leaseDurationSeconds: '--lease-duration-seconds',
  renewDeadlineSeconds: '--renew-deadline-seconds',
  retryPeriodSeconds: '--retry-period-seconds',
  metricsPort: '--metrics-port / METRICS_PORT',
  logLevel: '--log-level / LOG_LEVEL',
};

/**
 * Flags win over environment variables. `--namespace` is a comma-separated list; empty (the
 * default) watches every namespace. In a cluster, POD_NAME and POD_NAMESPACE come from the
 * downward API and name this replica in the Lease.
 */
export function parseCoordinatorConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CoordinatorConfig {
  let flags: Partial<Record<keyof typeof FLAGS, string>>;
  try {
    flags = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigError('coordinator flags', [{ path: 'argv', message: error instanceof Error ? error.message : String(error) }]);
  }
  const pick = (flag: keyof typeof FLAGS, variable?: string): string | undefined => {
    const value = flags[flag] ?? (variable === undefined ? undefined : env[variable]);
    return value === '' ? undefined : value;
  };
  const parsed = schema.safeParse({
    kubeconfig: pick('kubeconfig', 'KUBECONFIG'),
    namespaces: pick('namespace', 'WATCH_NAMESPACE'),
    leaseName: pick('lease-name', 'LEASE_NAME'),
    leaseNamespace: pick('lease-namespace', 'POD_NAMESPACE'),
    identity: pick('identity', 'POD_NAME'),
    leaseDurationSeconds: pick('lease-duration-seconds'),
    renewDeadlineSeconds: pick('renew-deadline-seconds'),
    retryPeriodSeconds: pick('retry-period-seconds'),
    metricsPort: pick('metrics-port', 'METRICS_PORT'),
    logLevel: pick('log-level', 'LOG_LEVEL'),
  });
  if (!parsed.success) {
    throw new ConfigError(
      'coordinator configuration',
      parsed.error.issues.map((issue) => {
        const field = String(issue.path[0] ?? '');
        return { path: COORDINATOR_SETTINGS[field] ?? field, message: issue.message };
      }),
    );
  }
  const c = parsed.data;
  return {
    kubeconfig: c.kubeconfig,
    namespaces: c.namespaces.split(',').map((n) => n.trim()).filter((n) => n !== ''),
    leaseName: c.leaseName,
    leaseNamespace: c.leaseNamespace,
    identity: c.identity,
    leaseDurationSeconds: c.leaseDurationSeconds,
    renewDeadlineMs: c.renewDeadlineSeconds * 1000,
    retryPeriodMs: c.retryPeriodSeconds * 1000,
    metricsPort: c.metricsPort,
    logLevel: c.logLevel,
  };
}
