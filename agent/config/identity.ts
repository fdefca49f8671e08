import { join } from 'node:path';
import type { ConfigProblem } from '../../shared/errors.ts';
import { DEFAULT_KEY_DOMAIN } from '../../shared/keys.ts';
import { dnsLabel, dnsSubdomain } from '../../shared/config/validators.ts';
import { optional, problem, required, seconds } from './flag-fields.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/** Who the agent is, whom it talks to, and how it keeps going. */
export interface IdentityConfig {
  readonly nodeName: string;
  readonly podName: string;
  readonly podNamespace: string;
  /** Short driver name (`gpu`, `ofed`, ...): the `%s` of every key. */
  readonly driver: string;
  readonly keyDomain: string;
  /** Undefined: in-cluster credentials. */
  readonly kubeconfig: string | undefined;
  readonly lockPath: string;
  /** Backoff between failed attempts: doubles from `initialMs` up to `maxMs`. */
  readonly retry: { readonly initialMs: number; readonly maxMs: number };
}

export const identityFlags = {
  'node-name': required,
  'pod-name': required,
  'pod-namespace': required,
  'driver-name': required.pipe(dnsLabel),
  'key-domain': dnsSubdomain.default(DEFAULT_KEY_DOMAIN),
  kubeconfig: optional,
  'lock-path': optional,
  'retry-initial-seconds': seconds.default(10),
  'retry-max-seconds': seconds.default(300),
};

/** Node-local files of one driver live here unless a flag moves them. */
export function runDir(c: RawAgentConfig): string {
  return join('/run/driver-rollout', c['driver-name']);
}

export function identityConfig(c: RawAgentConfig, problems: ConfigProblem[]): IdentityConfig {
  const retry = { initialMs: c['retry-initial-seconds'] * 1000, maxMs: c['retry-max-seconds'] * 1000 };
  if (retry.maxMs < retry.initialMs) problems.push(problem('retry-max-seconds', 'must not be below --retry-initial-seconds'));
  return {
    nodeName: c['node-name'],
    podName: c['pod-name'],
    podNamespace: c['pod-namespace'],
    driver: c['driver-name'],
    keyDomain: c['key-domain'],
    kubeconfig: c.kubeconfig,
    lockPath: c['lock-path'] ?? join(runDir(c), 'agent.lock'),
    retry,
  };
}
