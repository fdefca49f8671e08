import { describe, expect, it } from 'vitest';
import { CompileError, KernelHeadersMissingError, SourceChecksumError } from '../../../agent/build/build-errors.ts';
import { describeFailure } from '../../../agent/describe-failure.ts';
import { SysfsUnreadableError } from '../../../agent/detect/read-pci-devices.ts';
import {
  DriverInUseError,
  DriverRolledBackError,
  FirmwareMissingError,
  FirmwareUncheckableError,
  HeldByUserModulesError,
  KernelCommandError,
  ModuleBusyError,
  ModuleLoadError,
  NeverUnloadError,
} from '../../../agent/kernel/kernel-errors.ts';

const nvidiaRefused = new KernelCommandError({ command: 'modprobe nvidia_uvm', exitCode: 1, stderr: "modprobe: ERROR: could not insert 'nvidia_uvm': No such device" });
const loadFailed = new ModuleLoadError({ failedModule: 'nvidia', requested: 'nvidia_uvm', leftLoaded: [] }, nvidiaRefused);

const gccOutput = [
  "make: Entering directory '/usr/src/linux-headers-6.1.0-56-amd64'",
  '  CC [M]  /tmp/driver-rollout-build-drsample-nz5OW2/src/drsample_net.o',
  "/tmp/driver-rollout-build-drsample-nz5OW2/src/drsample_net.c:28:1: error: unknown type name 'this'",
  '   28 | this is not C;',
  "/tmp/driver-rollout-build-drsample-nz5OW2/src/drsample_net.c:28:9: error: expected '=', ',', ';', 'asm' or '__attribute__' before 'not'",
  'make[1]: *** [scripts/Makefile.build:255: drsample_net.o] Error 1',
].join('\n');

describe('describeFailure', () => {
  it.each([
    { step: 'build', error: new KernelHeadersMissingError('6.8.0-45-generic', ['/lib/modules/6.8.0-45-generic/build']), reason: 'KernelHeadersMissing' },
    { step: 'build', error: new SourceChecksumError('https://example.com/d.tgz', 'aa', 'bb'), reason: 'SourceChecksumMismatch' },
    { step: 'build', error: new Error('disk full'), reason: 'BuildFailed' },
    { step: 'load', error: new DriverInUseError('gpu', [{ module: 'nvidia', refcnt: 3, holders: [], outsideUsers: 3 }]), reason: 'DriverInUse' },
    { step: 'load', error: new ModuleBusyError({ command: 'rmmod nvidia', exitCode: 1, stderr: 'rmmod: ERROR: Module nvidia is in use' }), reason: 'DriverInUse' },
    { step: 'load', error: new KernelCommandError({ command: 'modprobe nvidia', exitCode: 1, stderr: "modprobe: ERROR: could not insert 'nvidia': No such device" }), reason: 'LoadFailed' },
    { step: 'load', error: loadFailed, reason: 'LoadFailed' },
    { step: 'load', error: new DriverRolledBackError(loadFailed, { version: '580.142', modules: ['nvidia'] }), reason: 'LoadFailedRolledBack' },
    { step: 'load', error: new FirmwareMissingError('firmware missing: nvidia needs nvidia/580.142/gsp_ga10x.bin'), reason: 'FirmwareMissing' },
    { step: 'load', error: new FirmwareUncheckableError('firmware /lib/firmware/nvidia/580.142/gsp_ga10x.bin that nvidia needs cannot be checked (EACCES)'), reason: 'FirmwareUncheckable' },
    { step: 'load', error: new HeldByUserModulesError('ofed', ['nvme_rdma']), reason: 'DriverInUse' },
    { step: 'load', error: new NeverUnloadError('gpu', ['nvidia'], '580.142'), reason: 'RebootRequired' },
    { step: 'detect', error: new SysfsUnreadableError('cannot list PCI devices in /sys/bus/pci/devices'), reason: 'DetectionFailed' },
    { step: 'verify', error: new Error('drsample_core is not in /sys/module'), reason: 'VerifyFailed' },
  ] as const)('$error.constructor.name in $step → $reason', ({ step, error, reason }) => {
    const d = describeFailure(step, error);
    expect(d.reason).toBe(reason);
    expect(d.message).toBe(`Failed: ${error.message}`);
  });

  it('missing headers: the message names the kernel and the package to install', () => {
    const d = describeFailure('build', new KernelHeadersMissingError('6.8.0-45-generic', ['/lib/modules/6.8.0-45-generic/build']));
    expect(d.message).toContain('kernel headers for 6.8.0-45-generic not found');
    expect(d.message).toContain('linux-headers-6.8.0-45-generic');
  });

  it("a compile failure shows the compiler's error lines without the temporary build directory", () => {
    const error = new CompileError({ kernelVersion: '6.1.0-56-amd64', command: 'make', exitCode: 2, outputTail: gccOutput });
    expect(describeFailure('build', error)).toEqual({
      reason: 'CompileFailed',
      message:
        "Failed: compiling the driver for kernel 6.1.0-56-amd64 failed (exit 2): drsample_net.c:28:1: error: unknown type name 'this'; " +
        "drsample_net.c:28:9: error: expected '=', ',', ';', 'asm' or '__attribute__' before 'not'",
    });
  });

  it('a hint the agent saw is appended to the message', () => {
    const error = new KernelCommandError({ command: 'modprobe nvidia', exitCode: 1, stderr: "modprobe: ERROR: could not insert 'nvidia': No such device" });
    expect(describeFailure('load', error, 'the devices are bound to nouveau').message).toBe(
      "Failed: modprobe nvidia failed (exit 1): modprobe: ERROR: could not insert 'nvidia': No such device; the devices are bound to nouveau",
    );
  });

  it('anything thrown, even a non-Error, becomes a reason and a message', () => {
    expect(describeFailure('load', 'boom')).toEqual({ reason: 'LoadFailed', message: 'Failed: boom' });
  });
});
