/**
 * Every error the programs throw carries structured fields (logged as JSON by pino) and,
 * where it wraps another, a `cause`. Kinds are subclasses named after what went wrong.
 */
export type ErrorFields = Readonly<Record<string, unknown>>;

export class DriverRolloutError extends Error {
  readonly fields: ErrorFields;

  constructor(message: string, fields: ErrorFields = {}, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.fields = fields;
  }
}

/** One problem in a configuration: `path` names the field (e.g. `spec.upgradePolicy.maxUnavailable`). */
export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

/** A configuration with one or more problems; every problem is listed, none is applied. */
export class ConfigError extends DriverRolloutError {
  readonly problems: readonly ConfigProblem[];

  constructor(source: string, problems: readonly ConfigProblem[]) {
    super(
      `invalid ${source}: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
      { source, problems },
    );
    this.problems = problems;
  }
}

/** Normalises anything caught into an Error, so nothing downstream handles a non-Error. */
export function toError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new DriverRolloutError(typeof thrown === 'string' ? thrown : 'non-Error thrown', { thrown });
}
