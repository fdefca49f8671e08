import type { BuildConfig } from './build.ts';
import type { DriverRootConfig } from './driver-root.ts';
import type { IdentityConfig } from './identity.ts';
import type { KernelConfig } from './kernel.ts';
import type { ReportingConfig } from './reporting.ts';
import type { TeardownConfig } from './teardown.ts';

/**
 * Everything the agent is told at start-up; parsed once by main.ts (parseAgentConfig). One
 * concern per file: identity.ts (who and where), build.ts (what to compile, how), kernel.ts
 * (devices, modules, loading), teardown.ts (what is taken down around an unload), driver-root.ts (the
 * driver's user space: version guard, daemons, the root published while the driver is loaded),
 * reporting.ts (ready file, HTTP, logs).
 */
export type AgentConfig = IdentityConfig & BuildConfig & KernelConfig & TeardownConfig & DriverRootConfig & ReportingConfig;
