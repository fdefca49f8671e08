import { NEXT_KERNEL_FAILED, NEXT_KERNEL_READY, type DriverKeys } from '../../shared/keys.ts';
import { compareKernelReleases } from '../build/find-installed-kernels.ts';
import { NEXT_KERNEL_BUILD_FAILED_EVENT, NEXT_KERNEL_MODULES_REFUSED_EVENT, NEXT_KERNEL_READY_EVENT, type NodeEventInput } from '../report/node-events.ts';
import { MODULE_SIGNATURE_UNTRUSTED } from '../describe-failure.ts';
import { toLabelValue, type LabelPatch } from '../report/node-labels.ts';

/** How the driver's build for one installed, not running kernel ended. */
export type NextKernelResult =
  | {
      readonly kernel: string;
      readonly outcome: 'ready';
      /** Found in the module cache (built by an earlier pass): nothing was compiled now. */
      readonly cacheHit: boolean;
      readonly durationMs: number;
    }
  | {
      readonly kernel: string;
      readonly outcome: 'failed';
      /**
       * The build failure's reason (describeFailure): CompileFailed, KernelHeadersMissing, ...; or
       * ModuleSignatureUntrusted: the driver builds, and the kernel would refuse its modules.
       */
      readonly reason: string;
      /** The compiler's first error, else the error's first line. */
      readonly firstError: string;
      readonly durationMs: number;
    };


/**
 * Pure: the node labels of a preflight pass. One label value cannot list several kernels, so:
 * `<driver>-driver.next-kernel` is the verdict over all of them (`failed` when any fails, else
 * `ready`), selectable with `-l ...next-kernel=failed`; `<driver>-driver.next-kernel.failed`
 * names the newest failing kernel (the one a reboot most likely boots). Both go when no other
 * kernel has headers. Every failing kernel has its own Event and metric series.
 */
export function nextKernelLabels(keys: DriverKeys, results: readonly NextKernelResult[]): LabelPatch {
  if (results.length === 0) return { [keys.nextKernel]: null, [keys.nextKernelFailed]: null };
  const failing = results.filter((r) => r.outcome === 'failed').map((r) => r.kernel).sort(compareKernelReleases);
  const newest = failing.at(-1);
  return newest === undefined
    ? { [keys.nextKernel]: NEXT_KERNEL_READY, [keys.nextKernelFailed]: null }
    : { [keys.nextKernel]: NEXT_KERNEL_FAILED, [keys.nextKernelFailed]: toLabelValue(newest) };
}

export interface NextKernelEventContext {
  readonly driver: string;
  readonly version: string;
}

/**
 * Pure: the Events a pass writes: one per kernel whose outcome (or first error) changed since the
 * previous pass, so a kernel that keeps failing the same way is not announced every pass. Each
 * kernel is its own Event (its own `key`): two failing kernels never merge into one.
 */
export function nextKernelEvents(
  context: NextKernelEventContext,
  previous: ReadonlyMap<string, NextKernelResult>,
  results: readonly NextKernelResult[],
): NodeEventInput[] {
  const events: NodeEventInput[] = [];
  for (const result of results) {
    const before = previous.get(result.kernel);
    if (before !== undefined && sameOutcome(before, result)) continue;
    const subject = `${context.driver} driver ${context.version}`;
    events.push(
      result.outcome === 'failed'
        ? result.reason === MODULE_SIGNATURE_UNTRUSTED
          ? {
              type: 'Warning',
              reason: NEXT_KERNEL_MODULES_REFUSED_EVENT,
              key: `${NEXT_KERNEL_MODULES_REFUSED_EVENT}\u0000${result.kernel}`,
              message: `${subject} builds for kernel ${result.kernel} (installed, not running), and a reboot into it would leave the node without the driver: ${result.firstError}`,
            }
          : {
              type: 'Warning',
              reason: NEXT_KERNEL_BUILD_FAILED_EVENT,
              key: `${NEXT_KERNEL_BUILD_FAILED_EVENT}\u0000${result.kernel}`,
              message: `${subject} does not build for kernel ${result.kernel} (installed, not running; a reboot into it would leave the node without the driver): ${result.reason}: ${result.firstError}`,
            }
        : {
            type: 'Normal',
            reason: NEXT_KERNEL_READY_EVENT,
            key: `${NEXT_KERNEL_READY_EVENT}\u0000${result.kernel}`,
            message: `${subject} built for kernel ${result.kernel} (installed, not running) and cached: a reboot into it loads without compiling`,
          },
    );
  }
  return events;
}

function sameOutcome(a: NextKernelResult, b: NextKernelResult): boolean {
  if (a.outcome === 'ready' || b.outcome === 'ready') return a.outcome === b.outcome;
  return a.reason === b.reason && a.firstError === b.firstError;
}
