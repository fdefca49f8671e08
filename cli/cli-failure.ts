import { DriverRolloutError } from '../shared/errors.ts';

/** The plugin could not do what was asked (not found, ambiguous, wrong state): it exits 1. */
export class CliFailure extends DriverRolloutError {}
