import {
  BuildConfigError,
  BuildOutputError,
  CompileError,
  KernelHeadersMissingError,
  ModuleSigningError,
  SourceChecksumError,
  SourceFetchError,
} from './build/build-errors.ts';
import {
  DriverInUseError,
  DriverRolledBackError,
  DriverVerificationError,
  FirmwareMissingError,
  FirmwareUncheckableError,
  HeldByUserModulesError,
  KernelCommandError,
  ModuleBusyError,
  ModuleLoadError,
  ModuleSignatureUntrustedError,
  NeverUnloadError,
} from './kernel/kernel-errors.ts';
import { ModuleConfigError } from './kernel/read-module-config.ts';
import { DriverRootError } from './root/driver-root.ts';
import { DeviceTeardownError, HolderCommandError, VirtualFunctionsInUseError } from './teardown/teardown-errors.ts';
import { UserSpaceMismatchError, UserSpaceUnreadableError } from './user-space/user-space-errors.ts';
import { DaemonFailedError, FabricManagerMissingError } from './daemons/daemon-errors.ts';

/** The step of the flow that failed. */
export type AgentStep = 'detect' | 'build' | 'load' | 'verify';

export interface FailureDescription {
  /** CamelCase reason for the pod condition, the node Event and the failure metric. */
  readonly reason: string;
  /** `Failed: <why>`, naming what to do where the error knows it (the headers package to install). */
  readonly message: string;
}

/** The reason of a driver whose modules the kernel would refuse (also the next-kernel preflight's). */
export const MODULE_SIGNATURE_UNTRUSTED = 'ModuleSignatureUntrusted';

/**
 * Known errors first (most specific class first), in order; anything else is named after its step.
 * Every reason here and in STEP_REASONS has an entry in docs/runbook.md (test/unit/docs/runbook.test.ts).
 */
export const REASONS: readonly (readonly [new (...args: never[]) => Error, string])[] = [
  [KernelHeadersMissingError, 'KernelHeadersMissing'],
  [CompileError, 'CompileFailed'],
  [SourceChecksumError, 'SourceChecksumMismatch'],
  [SourceFetchError, 'SourceFetchFailed'],
  [ModuleSigningError, 'ModuleSigningFailed'],
  [BuildOutputError, 'BuildOutputInvalid'],
  [BuildConfigError, 'BuildConfigInvalid'],
  [DriverRolledBackError, 'LoadFailedRolledBack'],
  [ModuleLoadError, 'LoadFailed'],
  [FirmwareMissingError, 'FirmwareMissing'],
  [FirmwareUncheckableError, 'FirmwareUncheckable'],
  [NeverUnloadError, 'RebootRequired'],
  [ModuleSignatureUntrustedError, MODULE_SIGNATURE_UNTRUSTED],
  [HeldByUserModulesError, 'DriverInUse'],
  [DriverInUseError, 'DriverInUse'],
  [ModuleBusyError, 'DriverInUse'],
  [DriverVerificationError, 'VerifyFailed'],
  [KernelCommandError, 'LoadFailed'],
  [VirtualFunctionsInUseError, 'VirtualFunctionsInUse'],
  [DeviceTeardownError, 'DeviceTeardownFailed'],
  [HolderCommandError, 'HolderCommandFailed'],
  [ModuleConfigError, 'ModuleConfigInvalid'],
  [UserSpaceMismatchError, 'UserSpaceMismatch'],
  [UserSpaceUnreadableError, 'UserSpaceUnreadable'],
  [FabricManagerMissingError, 'FabricManagerMissing'],
  [DaemonFailedError, 'DaemonFailed'],
  [DriverRootError, 'DriverRootFailed'],
];

/** The reason of a failed step whose error is none of REASONS'. */
export const STEP_REASONS: Readonly<Record<AgentStep, string>> = {
  detect: 'DetectionFailed',
  build: 'BuildFailed',
  load: 'LoadFailed',
  verify: 'VerifyFailed',
};

/**
 * Pure: how a failed step is shown to people. Never throws, whatever was thrown. `hint` is
 * what the agent saw that likely explains it (devices bound to a competing driver).
 */
export function describeFailure(step: AgentStep, error: unknown, hint?: string): FailureDescription {
  const reason = REASONS.find(([kind]) => error instanceof kind)?.[1] ?? STEP_REASONS[step];
  const why = error instanceof CompileError ? summarizeCompileError(error) : error instanceof Error ? error.message : String(error);
  return { reason, message: `Failed: ${why}${hint === undefined ? '' : `; ${hint}`}` };
}

const MAX_COMPILER_ERRORS = 5;

/**
 * A compile failure in a few lines: the headline and the compiler's `error:` lines, with the
 * temporary build directory cut from the paths (it differs on every attempt and says nothing).
 * The whole output stays in the log.
 */
export function summarizeCompileError(error: CompileError): string {
  const headline = error.message.split('\n', 1)[0] ?? error.message;
  const errors = compilerErrorLines(error);
  const shown = errors.slice(0, MAX_COMPILER_ERRORS);
  const more = errors.length > shown.length ? ` (and ${errors.length - shown.length} more)` : '';
  return shown.length === 0 ? error.message : `${headline} ${shown.join('; ')}${more}`;
}

/** The compiler's `error:` (and kbuild's `ERROR:`) lines, the temporary build directory cut from their paths. */
function compilerErrorLines(error: CompileError): string[] {
  return error.outputTail
    .split('\n')
    .filter((line) => /\berror:/.test(line) || /^\S*ERROR:/.test(line))
    .map((line) => line.trim().replace(/^\/\S*\/([^/\s]+:\d+)/, '$1'));
}

/**
 * Pure: the one line that says why a build failed: the compiler's first error
 * (`drsample_core.c:12:1: error: ...`), else the first line of the error's message.
 */
export function firstBuildError(error: unknown): string {
  if (error instanceof CompileError) {
    const first = compilerErrorLines(error)[0];
    if (first !== undefined) return first;
  }
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n', 1)[0] ?? message;
}
