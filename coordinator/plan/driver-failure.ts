/**
 * Reading the agent's readiness-gate condition: is the driver failing, and why.
 *
 * The agent (agent/run-agent.ts) writes one condition on its pod: status True once the driver is
 * loaded (`Loaded`) or nothing is to be loaded (`NoDevice`); False with a reason naming its
 * current step while it works (AGENT_PROGRESS_REASONS), and False with a failure reason
 * (`CompileFailed`, `KernelHeadersMissing`, `LoadFailed`, `DriverInUse`, `VerifyFailed`,
 * `FirmwareMissing`, ...) and its message when a step failed, and while it retries after one
 * (the message then ends `(retry N: <step>)`). Any False reason that is not a progress reason is
 * a failure, so a failure reason the agent learns later needs no change here.
 */
import type { DriverPodSnapshot } from './snapshot.ts';

/** The reasons of the agent's working steps (agent/report/driver-state.ts DRIVER_PHASES, less the outcomes; a unit test keeps both in step). */
export const AGENT_PROGRESS_REASONS: ReadonlySet<string> = new Set(['Starting', 'WaitingForLock', 'Detecting', 'Building', 'Loading', 'Verifying', 'Stopping', 'Unloaded']);

/**
 * The agent's reason when the reload would unload a module on its never-unload list
 * (agent/describe-failure.ts, NeverUnloadError): only a reboot helps, so waiting is pointless.
 */
export const REBOOT_REQUIRED_REASON = 'RebootRequired';

export interface DriverFailure {
  readonly pod: DriverPodSnapshot;
  readonly reason: string;
  readonly message: string;
}

/** The first pod whose agent reports a failure now; null when none does. */
export function driverFailure(pods: readonly DriverPodSnapshot[]): DriverFailure | null {
  for (const pod of pods) {
    const c = pod.agentCondition;
    if (c === null || c.status !== 'False' || c.reason === '' || AGENT_PROGRESS_REASONS.has(c.reason)) continue;
    return { pod, reason: c.reason, message: c.message };
  }
  return null;
}
