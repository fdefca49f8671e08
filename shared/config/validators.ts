import { z } from 'zod';

/**
 * The validators the programs' settings share. Kubernetes names: a DNS label (`gpu`, a driver
 * name: it goes into label keys), a DNS subdomain (a node name, a key domain, a Lease name).
 */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

export const dnsLabel = z
  .string()
  .max(63, { error: 'must be at most 63 characters' })
  .regex(DNS_LABEL, { error: 'must be a DNS label such as "gpu" or "ofed" (lowercase letters, digits, "-"): it goes into label keys' });

export const dnsSubdomain = z
  .string()
  .max(253, { error: 'must be at most 253 characters' })
  .regex(DNS_SUBDOMAIN, { error: 'must be a DNS subdomain (lowercase letters, digits, "-" and ".")' });

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const logLevel = z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info');

/** A Kubernetes label/annotation key: `[DNS-subdomain-prefix/]name`, name at most 63 characters. */
export function isQualifiedName(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && QUALIFIED_NAME_PART.test(name);
}
