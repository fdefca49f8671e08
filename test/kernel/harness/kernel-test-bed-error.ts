import { DriverRolloutError } from '../../../shared/errors.ts';

/**
 * The kernel test bed could not do what a test asked: a missing package (QEMU, the kernel
 * image, busybox-static), a guest that did not boot, a command that ran past its time.
 * Tests fail with it, never skip: CI must install what the bed needs.
 */
export class KernelTestBedError extends DriverRolloutError {}
