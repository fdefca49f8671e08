/**
 * The alert gate's verdict for one pass (spec.alertGate): which firing alerts hold starts, and
 * the hold every candidate node gets. Pure: the poller (coordinator/alerts/) brings the reading
 * into the snapshot as data; this only judges it.
 *
 * - An alert matches when its name matches one of `alerts` (any, when there are none) and none
 *   of `ignore`; patterns are anchored at both ends, as Prometheus's `=~`.
 * - No reading yet, or a reading that is a problem (unreachable, timed out, an HTTP error, an
 *   answer that is not the alerts API's, a Secret that cannot be read): hold, saying so (fails
 *   closed). Started nodes are not held by the gate (it is a start check).
 * - The hold has no wake time: a new reading that changes the verdict wakes the loop.
 */
import type { AlertGatePolicy } from '../policy/driver-rollout-spec.ts';
import type { AlertGateReading, FiringAlert } from './snapshot.ts';
import { untimed, type StartHold } from './start-checks.ts';

/** Alert names a message lists; more are counted. */
const NAMES_SHOWN = 5;

/** The firing alerts that hold starts under `gate`. */
export function matchingAlerts(gate: Pick<AlertGatePolicy, 'alerts' | 'ignore'>, firing: readonly FiringAlert[]): FiringAlert[] {
  return firing.filter((a) => (gate.alerts.length === 0 || gate.alerts.some((p) => p.test(a.name))) && !gate.ignore.some((p) => p.test(a.name)));
}

/** The hold the gate puts on every node that could start; null when no gate is set or no matching alert fires. */
export function alertGateHold(gate: AlertGatePolicy | null, reading: AlertGateReading | null | undefined): StartHold | null {
  if (gate === null) return null;
  if (reading === null || reading === undefined) return unreachable(gate, 'no answer yet');
  if (reading.kind === 'unanswered') return unreachable(gate, reading.problem);
  const matching = matchingAlerts(gate, reading.firing);
  if (matching.length === 0) return null;
  const names = [...new Set(matching.map((a) => a.name))].sort();
  const shown = names.length > NAMES_SHOWN ? `${names.slice(0, NAMES_SHOWN).join(', ')} and ${names.length - NAMES_SHOWN} more` : names.join(', ');
  const message = `alert firing: ${shown} (alertGate holds new starts)`;
  return untimed({ code: 'alert-firing', message, detail: `${message}; ${matching.length} firing alert${matching.length === 1 ? '' : 's'} match at ${gate.url}` });
}

function unreachable(gate: AlertGatePolicy, problem: string): StartHold {
  const message = `alert gate cannot ask Prometheus at ${gate.url}: ${problem} (fails closed: no node starts)`;
  return untimed({ code: 'alert-gate-unreachable', message, detail: message });
}
