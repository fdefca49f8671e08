import type { DriverKeys } from '../../shared/keys.ts';
import type { DriverState } from './driver-state.ts';
import type { LabelPatch } from './node-labels.ts';

/**
 * Pure: the agent's node annotation `driver-rollout.io/<driver>-driver-loaded`, what is loaded
 * and by which pod (shared/driver-identity.ts), which the coordinator compares with a new
 * template to restart the pod without cordon or drain when the driver would not change. Set
 * once a load is verified (the fast path included); removed when the driver is unloaded on stop,
 * the node has no device, or a step fails (a failed load may have left nothing loaded: the
 * coordinator then takes the full path, which is always safe). Other phases leave it as it is.
 */
export function nodeAnnotationsFor(keys: DriverKeys, state: DriverState): LabelPatch {
  if (state.phase === 'Loaded' && state.loadedDriver !== undefined) return { [keys.driverLoaded]: state.loadedDriver };
  if (state.phase === 'Failed' || state.phase === 'NoDevice' || state.phase === 'Unloaded') return { [keys.driverLoaded]: null };
  return {};
}
