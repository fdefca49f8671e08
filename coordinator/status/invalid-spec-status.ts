import type { ConfigProblem } from '../../shared/errors.ts';
import type { RolloutCondition } from '../plan/action.ts';

/** The message of the InvalidSpec condition and Event: every problem with its field path. */
export function invalidSpecMessage(problems: readonly ConfigProblem[]): string {
  return problems.map((p) => `${p.path}: ${p.message}`).join('; ');
}

/** Conditions of a DriverRollout whose spec is invalid: it does nothing until fixed. */
export function invalidSpecConditions(problems: readonly ConfigProblem[]): RolloutCondition[] {
  return [
    { type: 'InvalidSpec', status: 'True', reason: 'InvalidSpec', message: invalidSpecMessage(problems) },
    { type: 'Progressing', status: 'False', reason: 'InvalidSpec', message: 'the spec is invalid; no node is touched' },
  ];
}
