import { join } from 'node:path';
import { z } from 'zod';
import { logLevel, type LogLevel } from '../../shared/config/validators.ts';
import { optional } from './flag-fields.ts';
import { runDir } from './identity.ts';
import type { RawAgentConfig } from './parse-agent-config.ts';

/** How the agent tells the node, the kubelet and people how it is doing. */
export interface ReportingConfig {
  readonly readyFile: string;
  readonly httpHost: string;
  /** 0 picks a free port (tests). */
  readonly httpPort: number;
  readonly logLevel: LogLevel;
}

export const reportingFlags = {
  'ready-file': optional,
  'http-host': z.string().default('0.0.0.0'),
  'http-port': z.coerce.number().int().min(0).max(65535).default(8080),
  'log-level': logLevel,
};

export function reportingConfig(c: RawAgentConfig): ReportingConfig {
  return {
    readyFile: c['ready-file'] ?? join(runDir(c), '.driver-ready'),
    httpHost: c['http-host'],
    httpPort: c['http-port'],
    logLevel: c['log-level'],
  };
}
