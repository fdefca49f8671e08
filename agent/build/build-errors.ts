import { DriverRolloutError } from '../../shared/errors.ts';

/**
 * No kernel headers for the target kernel. kbuild needs `/lib/modules/<kver>/build`, which on
 * Debian and Ubuntu comes from the package `linux-headers-<kver>`; custom kernels must ship theirs.
 */
export class KernelHeadersMissingError extends DriverRolloutError {
  readonly kernelVersion: string;
  readonly packageName: string;

  constructor(kernelVersion: string, searched: readonly string[]) {
    const packageName = `linux-headers-${kernelVersion}`;
    super(
      `kernel headers for ${kernelVersion} not found (looked in ${searched.join(', ')}); ` +
        `install the package ${packageName} on the node (apt-get install ${packageName}) or mount the headers of this kernel`,
      { kernelVersion, packageName, searched },
    );
    this.kernelVersion = kernelVersion;
    this.packageName = packageName;
  }
}

/** kbuild exited non-zero; `outputTail` holds the compiler's last lines. */
export class CompileError extends DriverRolloutError {
  readonly outputTail: string;

  constructor(fields: { kernelVersion: string; command: string; exitCode: number | undefined; outputTail: string }, cause?: unknown) {
    super(`compiling the driver for kernel ${fields.kernelVersion} failed (exit ${fields.exitCode ?? 'signal'}):\n${fields.outputTail}`, fields, { cause });
    this.outputTail = fields.outputTail;
  }
}

/** The build finished but its output is unusable (no modules, or built for another kernel). */
export class BuildOutputError extends DriverRolloutError {}

/** The source tarball could not be downloaded (after retries, or a permanent HTTP error). */
export class SourceFetchError extends DriverRolloutError {}

/** The downloaded tarball's sha256 is not the expected one: nothing from it is used. */
export class SourceChecksumError extends DriverRolloutError {
  constructor(url: string, expected: string, actual: string) {
    super(`sha256 of ${url} is ${actual}, expected ${expected}`, { url, expected, actual });
  }
}

/** `sign-file` failed or the signing key/certificate is unusable. */
export class ModuleSigningError extends DriverRolloutError {}

/**
 * The driver's build description cannot be used: a recipe field, a variable or a dkms.conf is
 * wrong. `fields.field` (or `fields.file`) names what to fix; retrying does not help.
 */
export class BuildConfigError extends DriverRolloutError {}
