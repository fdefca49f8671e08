import { DriverRolloutError } from '../shared/errors.ts';

/** A bad command line: the plugin prints the message and a hint, and exits 2. */
export class UsageError extends DriverRolloutError {}
