import { describe, expect, it } from 'vitest';
import { compareKernelReleases, kernelsFromListing, listedDirectory } from '../../../../agent/build/find-installed-kernels.ts';
import { prioritizedCommand } from '../../../../agent/build/run-build-command.ts';
import { nextKernelEvents, nextKernelLabels, type NextKernelResult } from '../../../../agent/preflight/next-kernel-report.ts';
import { driverKeys } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu');
const ready = (kernel: string, cacheHit = false): NextKernelResult => ({ kernel, outcome: 'ready', cacheHit, durationMs: 1 });
const failed = (kernel: string, firstError = "x.c:1:1: error: 'y' undeclared"): NextKernelResult => ({ kernel, outcome: 'failed', reason: 'CompileFailed', firstError, durationMs: 1 });
const context = { driver: 'gpu', version: '570.86.15' };

describe('kernelsFromListing / listedDirectory', () => {
  it.each([
    ['/lib/modules/{kernel}/build', ['6.1.0-50-amd64', '6.1.0-56-amd64'], ['6.1.0-50-amd64', '6.1.0-56-amd64']],
    ['/usr/src/linux-headers-{kernel}', ['linux-headers-6.1.0-56-amd64', 'linux-headers-6.1.0-56-common', 'linux-kbuild-6.1', 'python3.11'], ['6.1.0-56-amd64', '6.1.0-56-common']],
    ['/host/usr/src/kernels/{kernel}', ['5.14.0-427.13.1.el9_4.x86_64'], ['5.14.0-427.13.1.el9_4.x86_64']],
    ['/usr/src/linux-headers-', ['linux-headers-6.1'], []],
  ])('%s names %j → %j', (template, entries, expected) => {
    expect(kernelsFromListing(template, entries)).toEqual(expected);
  });

  it.each([
    ['/lib/modules/{kernel}/build', '/lib/modules'],
    ['/usr/src/linux-headers-{kernel}', '/usr/src'],
    ['/{kernel}', '/'],
    ['/usr/src/fixed', undefined],
  ])('%s is listed in %s', (template, dir) => {
    expect(listedDirectory(template)).toBe(dir);
  });

  it('orders releases by their numbers', () => {
    expect(['6.1.0-9-amd64', '6.1.0-50-amd64', '6.1.0-10-amd64', '5.10.0-30-amd64'].sort(compareKernelReleases)).toEqual(['5.10.0-30-amd64', '6.1.0-9-amd64', '6.1.0-10-amd64', '6.1.0-50-amd64']);
  });
});

describe('nextKernelLabels', () => {
  it.each<[string, NextKernelResult[], Record<string, string | null>]>([
    ['no other kernel: both labels go', [], { [keys.nextKernel]: null, [keys.nextKernelFailed]: null }],
    ['all ready', [ready('6.1.0-50-amd64'), ready('6.1.0-9-amd64')], { [keys.nextKernel]: 'ready', [keys.nextKernelFailed]: null }],
    ['one of two fails: failed, naming it', [ready('6.1.0-60-amd64'), failed('6.1.0-50-amd64')], { [keys.nextKernel]: 'failed', [keys.nextKernelFailed]: '6.1.0-50-amd64' }],
    ['two fail: the newest is named (numeric order)', [failed('6.1.0-50-amd64'), failed('6.1.0-9-amd64')], { [keys.nextKernel]: 'failed', [keys.nextKernelFailed]: '6.1.0-50-amd64' }],
    ['a release that is no label value is made one', [failed('6.6.0+rt1~custom')], { [keys.nextKernel]: 'failed', [keys.nextKernelFailed]: '6.6.0_rt1_custom' }],
  ])('%s', (_name, results, labels) => {
    expect(nextKernelLabels(keys, results)).toEqual(labels);
    expect(keys.nextKernel).toBe('driver-rollout.io/gpu-driver.next-kernel');
  });
});

describe('nextKernelEvents', () => {
  it('announces each kernel once per change: a Warning naming kernel and first error, a Normal when it builds', () => {
    const first = nextKernelEvents(context, new Map(), [failed('6.1.0-50-amd64'), ready('6.1.0-60-amd64')]);
    expect(first).toEqual([
      {
        type: 'Warning',
        reason: 'NextKernelBuildFailed',
        key: 'NextKernelBuildFailed\u00006.1.0-50-amd64',
        message: "gpu driver 570.86.15 does not build for kernel 6.1.0-50-amd64 (installed, not running; a reboot into it would leave the node without the driver): CompileFailed: x.c:1:1: error: 'y' undeclared",
      },
      expect.objectContaining({ type: 'Normal', reason: 'NextKernelReady', key: 'NextKernelReady\u00006.1.0-60-amd64' }),
    ]);
    const previous = new Map([failed('6.1.0-50-amd64'), ready('6.1.0-60-amd64', false)].map((r) => [r.kernel, r]));
    expect(nextKernelEvents(context, previous, [failed('6.1.0-50-amd64'), ready('6.1.0-60-amd64', true)])).toEqual([]);
    expect(nextKernelEvents(context, previous, [failed('6.1.0-50-amd64', 'x.c:2:1: error: other'), ready('6.1.0-60-amd64')]).map((e) => e.message)).toEqual([
      expect.stringContaining('x.c:2:1: error: other'),
    ]);
    expect(nextKernelEvents(context, previous, [ready('6.1.0-50-amd64')]).map((e) => e.reason)).toEqual(['NextKernelReady']);
  });
});

describe('a next kernel that would refuse the modules (ModuleSignatureUntrusted)', () => {
  const refused: NextKernelResult = {
    kernel: '6.1.0-60-amd64',
    outcome: 'failed',
    reason: 'ModuleSignatureUntrusted',
    firstError: 'the kernel enforces module signatures (Secure Boot) and would refuse gpu: nvidia unsigned; the keys it trusts: Debian Secure Boot CA; sign the modules with an enrolled key, or enroll ...',
    durationMs: 1,
  };

  it('fails the node\'s next-kernel labels like a failed build, naming the kernel', () => {
    expect(nextKernelLabels(keys, [ready('6.1.0-50-amd64'), refused])).toEqual({ [keys.nextKernel]: 'failed', [keys.nextKernelFailed]: '6.1.0-60-amd64' });
  });

  it('is a Warning of its own, saying the driver builds and the kernel would refuse it, with the refusal', () => {
    expect(nextKernelEvents(context, new Map(), [refused])).toEqual([
      {
        type: 'Warning',
        reason: 'NextKernelModulesRefused',
        key: 'NextKernelModulesRefused\u00006.1.0-60-amd64',
        message: `gpu driver 570.86.15 builds for kernel 6.1.0-60-amd64 (installed, not running), and a reboot into it would leave the node without the driver: ${refused.firstError}`,
      },
    ]);
    expect(nextKernelEvents(context, new Map([[refused.kernel, refused]]), [refused])).toEqual([]);
    expect(nextKernelEvents(context, new Map([[refused.kernel, refused]]), [ready(refused.kernel)]).map((e) => e.reason)).toEqual(['NextKernelReady']);
  });
});

describe('prioritizedCommand', () => {
  it('runs a background build behind nice 19 and the idle I/O class', () => {
    expect(prioritizedCommand('make', ['-C', '/h', 'modules'], true)).toEqual({ file: 'nice', args: ['-n', '19', 'ionice', '-c', '3', 'make', '-C', '/h', 'modules'] });
    expect(prioritizedCommand('make', ['modules'], false)).toEqual({ file: 'make', args: ['modules'] });
  });
});
