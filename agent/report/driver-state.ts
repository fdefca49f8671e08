/**
 * The agent's state, as one value every reporter (pod condition, ready file, /readyz, metrics,
 * node labels) renders. Pure data: the flow decides the state, reporters only show it.
 */
export const DRIVER_PHASES = [
  'Starting',
  'WaitingForLock',
  'Detecting',
  'Building',
  'Loading',
  'Verifying',
  'Loaded',
  'NoDevice',
  'Failed',
  'Stopping',
  /** Stopped, and the driver unloaded (unload on stop). */
  'Unloaded',
] as const;
export type DriverPhase = (typeof DRIVER_PHASES)[number];

export interface DriverState {
  readonly phase: DriverPhase;
  /** One CamelCase word for the condition's `reason` (`Loaded`, `KernelHeadersMissing`, ...). */
  readonly reason: string;
  /** Human text for the condition's `message`, events and /readyz. */
  readonly message: string;
  /** Version of the driver loaded now, once verified. */
  readonly driverVersion?: string | undefined;
  /** What is loaded, as the node annotation `driver-rollout.io/<driver>-driver-loaded` says it (shared/driver-identity.ts renderLoadedDriver); once verified. */
  readonly loadedDriver?: string | undefined;
  /** Devices this driver serves on the node, once detected. */
  readonly deviceCount?: number | undefined;
}

/** The driver is usable (Loaded), or the node needs nothing from it (NoDevice). */
export function isReady(state: DriverState): boolean {
  return state.phase === 'Loaded' || state.phase === 'NoDevice';
}

/** Kubernetes' limit on a condition message is generous; events and logs stay readable at this size. */
const MAX_MESSAGE = 1024;

export function truncateMessage(message: string): string {
  return message.length <= MAX_MESSAGE ? message : `${message.slice(0, MAX_MESSAGE - 1)}…`;
}
