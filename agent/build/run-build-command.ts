import { execa } from 'execa';
import { CompileError } from './build-errors.ts';
import { describeCommandFailure } from './describe-command-failure.ts';

/** The only environment a build sees, besides the variables the recipe adds: nothing leaks from the agent's. */
export const BUILD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface BuildCommand {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd?: string;
  /** Added to the fixed environment (PATH, LC_ALL=C, HOME); part of the recipe, so of the cache key. */
  readonly env?: Readonly<Record<string, string>>;
  /** HOME for the command (a scratch directory: dkms and make must not read the agent's). */
  readonly home: string;
  readonly kernelVersion: string;
  /** Run at the lowest CPU and I/O priority (`nice -n 19 ionice -c 3`): builds nobody waits for. */
  readonly background?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** Pure: the command line as run, behind `nice`/`ionice` for a background build (the error names the command as asked). */
export function prioritizedCommand(command: string, args: readonly string[], background: boolean): { readonly file: string; readonly args: readonly string[] } {
  return background ? { file: 'nice', args: ['-n', '19', 'ionice', '-c', '3', command, ...args] } : { file: command, args };
}

/** How many trailing output lines a CompileError keeps: enough for gcc's first error and context. */
const OUTPUT_TAIL_LINES = 40;

/** Pure: the complete environment of a build command. */
export function buildEnvironment(home: string, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return { PATH: BUILD_PATH, LC_ALL: 'C', LANG: 'C', HOME: home, ...extra };
}

/**
 * Runs one build command with an explicit environment (the agent's own is not inherited); a
 * non-zero exit becomes CompileError with the output's tail. Returns the combined output.
 */
export async function runBuildCommand(request: BuildCommand): Promise<string> {
  const run = prioritizedCommand(request.command, request.args, request.background === true);
  const result = await execa(run.file, [...run.args], {
    all: true,
    reject: false,
    extendEnv: false,
    env: buildEnvironment(request.home, request.env),
    ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
    ...(request.signal === undefined ? {} : { cancelSignal: request.signal }),
  });
  if (result.exitCode === 0) return result.all;
  const output = result.all.trimEnd() === '' ? describeCommandFailure(result) : result.all.trimEnd();
  const outputTail = output.split('\n').slice(-OUTPUT_TAIL_LINES).join('\n');
  throw new CompileError(
    { kernelVersion: request.kernelVersion, command: [request.command, ...request.args].join(' '), exitCode: result.exitCode, outputTail },
    result.isCanceled ? request.signal?.reason : undefined,
  );
}
