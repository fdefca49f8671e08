import type { ScenarioStep, StepReport } from '../guest/scenario.ts';
import type { Guest } from './boot-guest.ts';
import { runGuestScenario } from './run-guest-scenario.ts';

/**
 * Runs the agent's steps in the guest and returns their reports. A step that fails with an error
 * other than `expectedErrors` (by error name) fails the test with the agent's log; an expected
 * refusal is returned as a result. Prints the wall time of each step, for the closing figures.
 */
export async function runAgentSteps(
  guest: Guest,
  name: string,
  scenario: { readonly steps: readonly ScenarioStep[]; readonly watch: readonly string[] },
  options: { readonly expectedErrors?: readonly string[]; readonly timeoutMs?: number } = {},
): Promise<readonly StepReport[]> {
  const report = await runGuestScenario(guest, scenario, { timeoutMs: options.timeoutMs ?? 540_000 });
  const expected = options.expectedErrors ?? [];
  const failed = report.steps.find((s) => s.error !== undefined && !expected.includes(s.error.name));
  if (failed?.error !== undefined) {
    throw new Error(`${name}: the agent failed: ${failed.error.name}: ${failed.error.message}\n--- agent log ---\n${report.agentLog.slice(-6_000)}`);
  }
  console.info(`kernel tests: ${name}: ${report.wallMs} ms in the guest; steps ${report.steps.map((s) => `${s.kind} ${s.durationMs} ms`).join(', ')}`);
  return report.steps;
}

/** The report of step `index`, or a failure saying how many steps the scenario reported. */
export function stepAt(steps: readonly StepReport[], index: number): StepReport {
  const found = steps[index];
  if (found === undefined) throw new Error(`the scenario reported ${steps.length} steps, not ${index + 1}`);
  return found;
}
