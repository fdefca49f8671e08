import { hostname } from 'node:os';
import { z } from 'zod';
import { parseSettings } from '../shared/config/parse-settings.ts';
import { problemOf, settingLabels, type SettingsTable } from '../shared/config/settings-table.ts';
import { dnsSubdomain, logLevel, type LogLevel } from '../shared/config/validators.ts';
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
  readonly logLevel: LogLevel;
}

const seconds = z.coerce.number().positive();

/**
 * The coordinator's settings. `--namespace` is a comma-separated list; empty (the default)
 * watches every namespace. In a cluster, POD_NAME and POD_NAMESPACE come from the downward API
 * and name this replica in the Lease.
 */
export const COORDINATOR_SETTINGS = {
  source: 'coordinator configuration',
  settings: {
    kubeconfig: z.string().optional(),
    namespace: z.string().default(''),
    'lease-name': dnsSubdomain.default('driver-rollout-coordinator'),
    'lease-namespace': z.string().min(1).default('default'),
    identity: z.string().min(1).default(`${hostname()}-${process.pid}`),
    'lease-duration-seconds': z.coerce.number().int().positive().default(15),
    'renew-deadline-seconds': seconds.default(10),
    'retry-period-seconds': seconds.default(2),
    'metrics-port': z.coerce.number().int().min(0).max(65535).default(8080),
    'log-level': logLevel,
  },
  envNames: { namespace: 'WATCH_NAMESPACE', 'lease-namespace': 'POD_NAMESPACE', identity: 'POD_NAME' },
} as const satisfies SettingsTable;

/** Every setting as `--flag / VARIABLE`, for `--help`. */
export function coordinatorSettings(): string[] {
  return settingLabels(COORDINATOR_SETTINGS);
}

/** Parses flags and environment once; throws ConfigError listing every problem (shared/config/parse-settings.ts). */
export function parseCoordinatorConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CoordinatorConfig {
  const { values: c, problems } = parseSettings(COORDINATOR_SETTINGS, argv, env);
  if (c['renew-deadline-seconds'] >= c['lease-duration-seconds']) {
    problems.push(problemOf(COORDINATOR_SETTINGS, 'renew-deadline-seconds', 'must be below --lease-duration-seconds, or two replicas could write at once'));
  }
  if (c['retry-period-seconds'] >= c['renew-deadline-seconds']) {
    problems.push(problemOf(COORDINATOR_SETTINGS, 'retry-period-seconds', 'must be below --renew-deadline-seconds'));
  }
  if (problems.length > 0) throw new ConfigError(COORDINATOR_SETTINGS.source, problems);
  return {
    kubeconfig: c.kubeconfig,
    namespaces: c.namespace.split(',').map((n) => n.trim()).filter((n) => n !== ''),
    leaseName: c['lease-name'],
    leaseNamespace: c['lease-namespace'],
    identity: c.identity,
    leaseDurationSeconds: c['lease-duration-seconds'],
    renewDeadlineMs: c['renew-deadline-seconds'] * 1000,
    retryPeriodMs: c['retry-period-seconds'] * 1000,
    metricsPort: c['metrics-port'],
    logLevel: c['log-level'],
  };
}
