import { runBuildCommand } from './run-build-command.ts';

export interface KbuildRequest {
  /** kbuild's output tree (the one with .config; Debian's linux-headers-<kver>). */
  readonly headersDir: string;
  /** The writable build copy of the driver sources (kbuild writes its outputs next to them). */
  readonly sourceDir: string;
  readonly kernelVersion: string;
  /** Extra `NAME=value` arguments for make, expanded (part of the cache key as templates). */
  readonly makeVariables: Readonly<Record<string, string>>;
  readonly jobs: number;
  /** HOME of the build (a scratch directory). */
  readonly home: string;
  /** Lowest CPU and I/O priority (see runBuildCommand). */
  readonly background?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** `make -C <headers> M=<src> NAME=value... modules`, with an explicit environment; CompileError on failure. */
export async function runKbuild(request: KbuildRequest): Promise<void> {
  await runBuildCommand({
    command: 'make',
    args: [
      '-C', request.headersDir,
      `M=${request.sourceDir}`,
      `-j${request.jobs}`,
      ...Object.entries(request.makeVariables).map(([name, value]) => `${name}=${value}`),
      'modules',
    ],
    home: request.home,
    kernelVersion: request.kernelVersion,
    background: request.background, signal: request.signal,
  });
}

/** Paths (relative to the build dir) of the .ko files kbuild lists in modules.order (`.ko` up to 6.1, `.o` after). */
export function parseModulesOrder(text: string, buildDir: string): string[] {
  const prefix = buildDir.endsWith('/') ? buildDir : `${buildDir}/`;
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => (line.startsWith(prefix) ? line.slice(prefix.length) : line))
    .map((line) => (line.endsWith('.o') ? `${line.slice(0, -2)}.ko` : line));
}
