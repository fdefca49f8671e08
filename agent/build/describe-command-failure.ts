/** The parts of an execa result (reject: false) that explain a failure. */
export interface FailedCommand {
  readonly stderr: string;
  readonly timedOut: boolean;
  readonly failed: boolean;
  readonly exitCode?: number | undefined;
  readonly shortMessage?: string | undefined;
}

/**
 * What went wrong, in the tool's own words when it wrote any, else execa's (a missing binary
 * gives "spawn modprobe ENOENT": the image lacks kmod or build-essential).
 */
export function describeCommandFailure(result: FailedCommand, timeoutMs?: number): string {
  if (result.timedOut) return `timed out${timeoutMs === undefined ? '' : ` after ${timeoutMs} ms`}`;
  const stderr = result.stderr.trim();
  if (stderr !== '') return stderr;
  if (result.exitCode === undefined && result.shortMessage !== undefined) return result.shortMessage;
  return '(no output)';
}
