import type { DriverIdentity } from '../../shared/driver-identity.ts';
import type { AgentConfig } from './agent-config.ts';

/** The identity of what this configuration loads (shared/driver-identity.ts), as the coordinator reads it from the template. */
export function driverIdentityOf(config: AgentConfig): DriverIdentity {
  return {
    version: config.driverVersion,
    modules: config.modules,
    loadPlan: config.loadPlan,
    loadOptional: config.loadOptional,
    parameters: config.moduleParameters,
    ...(config.source.kind === 'tarball' ? { sourceSha256: config.source.sha256 } : {}),
    ...(config.moduleConfigSha256 === undefined ? {} : { moduleConfigSha256: config.moduleConfigSha256 }),
  };
}
