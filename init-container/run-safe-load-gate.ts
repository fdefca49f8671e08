import type { Logger } from '../shared/logger.ts';
import type { Clock } from './clock.ts';
import { markNodeForSafeLoad } from './mark-node-for-safe-load.ts';
import type { NodeApi } from './node-api.ts';
import { waitUntilModulesUnused, type ReadModule } from './preflight.ts';
import { waitForSafeLoad } from './wait-for-safe-load.ts';

export interface GateSettings {
  readonly nodeName: string;
  readonly annotationKey: string;
  readonly stateLabelKey: string | undefined;
  /** Modules the driver will replace; empty turns the pre-flight off. */
  readonly preflightModules: readonly string[];
}

export interface GateDependencies {
  readonly api: NodeApi;
  readonly readModule: ReadModule;
  readonly signal: AbortSignal;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface GateResult {
  readonly waitedMs: number;
  readonly preflight: 'off' | 'passed';
}

/**
 * The whole gate, in order: mark our node, wait until the coordinator clears the mark (node
 * cordoned and drained), then, when configured, wait until the modules to be replaced are unused.
 * Resolves when the driver may load; every failure is thrown (see errors.ts), never swallowed.
 */
export async function runSafeLoadGate(settings: GateSettings, deps: GateDependencies): Promise<GateResult> {
  const common = { ...deps, nodeName: settings.nodeName, annotationKey: settings.annotationKey };
  await markNodeForSafeLoad(common);
  const cleared = await waitForSafeLoad({ ...common, stateLabelKey: settings.stateLabelKey });
  deps.logger.info(
    { node: settings.nodeName, annotation: settings.annotationKey, waitedMs: cleared.waitedMs, cordoned: cleared.node.unschedulable },
    'safe-load annotation cleared',
  );
  if (settings.preflightModules.length === 0) return { waitedMs: cleared.waitedMs, preflight: 'off' };
  await waitUntilModulesUnused({ ...deps, modules: settings.preflightModules });
  return { waitedMs: cleared.waitedMs, preflight: 'passed' };
}
