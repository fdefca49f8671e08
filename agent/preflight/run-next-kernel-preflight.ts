import { performance } from 'node:perf_hooks';
import { abortableSleep } from '../../shared/abortable-sleep.ts';
import { toError } from '../../shared/errors.ts';
import type { DriverKeys } from '../../shared/keys.ts';
import type { Logger } from '../../shared/logger.ts';
import type { BuiltDriver } from '../build/built-driver.ts';
import { describeFailure, firstBuildError, MODULE_SIGNATURE_UNTRUSTED } from '../describe-failure.ts';
import type { AgentMetrics } from '../report/agent-metrics.ts';
import type { NodeEventInput } from '../report/node-events.ts';
import type { LabelPatch } from '../report/node-labels.ts';
import { describeRefusal, isRefused, type SignatureVerdict } from '../../shared/module-signature-verdict.ts';
import { nextKernelEvents, nextKernelLabels, type NextKernelEventContext, type NextKernelResult } from './next-kernel-report.ts';

export interface NextKernelPreflightDeps {
  readonly keys: DriverKeys;
  readonly context: NextKernelEventContext;
  /** Kernel releases with installed headers (findInstalledKernels). */
  readonly findKernels: () => Promise<readonly string[]>;
  /**
   * Builds the driver for a kernel exactly as the agent would after booting it (same options, so
   * the same cache key), in the background: the result lands in the module cache.
   */
  readonly build: (kernel: string, signal: AbortSignal) => Promise<BuiltDriver>;
  /**
   * The module-signature verdict of the kernel a build is for (`built.kernelVersion`) on its
   * modules, under the policy that kernel is expected to boot with; a refused build is a failed
   * result. None: not judged.
   */
  readonly judgeSignatures?: (built: BuiltDriver) => Promise<SignatureVerdict>;
  readonly writeLabels: (patch: LabelPatch) => Promise<void>;
  readonly recordEvent: (event: NodeEventInput) => Promise<void>;
  readonly metrics: Pick<AgentMetrics, 'observeNextKernelBuild' | 'setNextKernels'>;
  readonly log: Logger;
}

/**
 * One preflight pass: builds the driver, one kernel after the other, for every kernel with
 * headers that is not `runningKernel`, judges each build's signatures (judgeSignatures), then reports (labels, an Event per changed kernel, metrics).
 * A build failure is a result, never a throw. Returns the results (empty when aborted midway:
 * nothing is reported then).
 */
export async function preflightNextKernels(
  deps: NextKernelPreflightDeps,
  runningKernel: string,
  previous: ReadonlyMap<string, NextKernelResult>,
  signal: AbortSignal,
): Promise<NextKernelResult[]> {
  const kernels = (await deps.findKernels()).filter((k) => k !== runningKernel);
  const results: NextKernelResult[] = [];
  for (const kernel of kernels) {
    if (signal.aborted) return [];
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const built = await deps.build(kernel, signal);
      deps.metrics.observeNextKernelBuild(seconds(), built.cacheHit ? 'cached' : 'built');
      const verdict = await deps.judgeSignatures?.(built);
      if (verdict !== undefined && isRefused(verdict)) {
        const reason = MODULE_SIGNATURE_UNTRUSTED;
        results.push({ kernel, outcome: 'failed', reason, firstError: describeRefusal(deps.context.driver, verdict), durationMs: Math.round(seconds() * 1000) });
        deps.log.warn({ kernel, reason, untrusted: verdict.untrusted }, 'next kernel: the driver builds, and the kernel would refuse its modules');
        continue;
      }
      results.push({ kernel, outcome: 'ready', cacheHit: built.cacheHit, durationMs: Math.round(seconds() * 1000) });
      deps.log.info({ kernel, cacheHit: built.cacheHit, durationMs: Math.round(seconds() * 1000) }, 'next kernel: the driver builds');
    } catch (error) {
      if (isAborted(signal)) return [];
      deps.metrics.observeNextKernelBuild(seconds(), 'failed');
      const { reason } = describeFailure('build', error);
      results.push({ kernel, outcome: 'failed', reason, firstError: firstBuildError(error), durationMs: Math.round(seconds() * 1000) });
      deps.log.warn({ kernel, reason, err: toError(error) }, 'next kernel: the driver does not build');
    }
  }
  await deps.writeLabels(nextKernelLabels(deps.keys, results));
  for (const event of nextKernelEvents(deps.context, previous, results)) await deps.recordEvent(event);
  deps.metrics.setNextKernels(results.map((r) => ({ kernel: r.kernel, ready: r.outcome === 'ready' })));
  return results;
}

/**
 * The background loop the agent starts once its driver is loaded: a pass now, then one every
 * `intervalMs` (kernels installed later are picked up; a cached kernel costs a cache lookup).
 * A pass whose report fails is reported again by the next one. Ends when `signal` aborts.
 */
export async function runNextKernelPreflight(
  deps: NextKernelPreflightDeps & { readonly intervalMs: number },
  runningKernel: string,
  signal: AbortSignal,
): Promise<void> {
  let previous = new Map<string, NextKernelResult>();
  while (!signal.aborted) {
    try {
      const results = await preflightNextKernels(deps, runningKernel, previous, signal);
      if (!isAborted(signal)) previous = new Map(results.map((r) => [r.kernel, r]));
    } catch (error) {
      deps.log.error({ err: toError(error) }, 'next-kernel preflight: cannot report; trying again next pass');
    }
    await abortableSleep(deps.intervalMs, signal);
  }
}

/** Read through a call: the signal flips while awaiting, which TypeScript's narrowing cannot see. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}
