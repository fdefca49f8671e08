import { execa } from 'execa';
import { CompileError } from './build-errors.ts';
import { describeCommandFailure } from './describe-command-failure.ts';

export interface KbuildRequest {
  readonly headersDir: string;
  /** The writable build copy of the driver sources (kbuild writes its outputs next to them). */
  readonly sourceDir: string;
  readonly kernelVersion: string;
  /** Extra `NAME=value` arguments for make (part of the cache key). */
  readonly makeVariables: Readonly<Record<string, string>>;
  readonly jobs: number;
  readonly signal?: AbortSignal | undefined;
}

/** How many trailing output lines a CompileError keeps: enough for gcc's first error and context. */
const OUTPUT_TAIL_LINES = 40;

/** `make -C <headers> M=<src> modules`; a non-zero exit becomes CompileError with the output's tail. */
export async function runKbuild(request: KbuildRequest): Promise<void> {
  const args = [
    '-C', request.headersDir,
    `M=${request.sourceDir}`,
    `-j${request.jobs}`,
    ...Object.entries(request.makeVariables).map(([name, value]) => `${name}=${value}`),
    'modules',
  ];
  const result = await execa('make', args, {
    all: true,
    reject: false,
    ...(request.signal === undefined ? {} : { cancelSignal: request.signal }),
  });
  if (result.exitCode === 0) return;
  const output = result.all.trimEnd() === '' ? describeCommandFailure(result) : result.all.trimEnd();
  const outputTail = output.split('\n').slice(-OUTPUT_TAIL_LINES).join('\n');
  throw new CompileError(
    { kernelVersion: request.kernelVersion, command: `make ${args.join(' ')}`, exitCode: result.exitCode, outputTail },
    result.isCanceled ? request.signal?.reason : undefined,
  );
}

/** Paths (relative to the build dir) of the .ko files kbuild lists in modules.order (`.ko` up to 6.1, `.o` after). */
export function parseModulesOrder(text: string, buildDir: string): string[] {
  const prefix = buildDir.endsWith('/') ? buildDir : `${buildDir}/`;
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => (line.startsWith(prefix) ? line.slice(prefix.length) : line))
    .map((line) => line.replace(/\.o$/, '.ko'));
}
