import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { nextKernelPreflightDeps } from '../../../agent/assemble-agent.ts';
import { parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import { systemHostInfo } from '../../../agent/detect/host-info.ts';
import type { NextKernelResult } from '../../../agent/preflight/next-kernel-report.ts';
import { preflightNextKernels } from '../../../agent/preflight/run-next-kernel-preflight.ts';
import { createAgentMetrics } from '../../../agent/report/agent-metrics.ts';
import type { NodeEventInput } from '../../../agent/report/node-events.ts';
import type { LabelPatch } from '../../../agent/report/node-labels.ts';
import { driverKeys } from '../../../shared/keys.ts';

/** What one pass of the next-kernel preflight found and reported. */
export interface NextKernelPass {
  /** `uname -r`: the kernel the pass left out. */
  readonly runningKernel: string;
  readonly results: readonly NextKernelResult[];
  /** The node label patches it wrote, in order. */
  readonly labels: readonly LabelPatch[];
  /** The node Events it recorded, in order. */
  readonly events: readonly NodeEventInput[];
}

/**
 * One pass of the agent's next-kernel preflight as the agent wires it (nextKernelPreflightDeps:
 * the kernels with installed headers, the agent's own build for each, its signature judge under
 * the running kernel's policy), configured by `env` as in its DaemonSet. There is no API server
 * in the guest: the label patches and Events are kept as the API server would have received them,
 * and returned with the results.
 */
export async function runNextKernelPass(env: Readonly<Record<string, string>>, logger: Logger): Promise<NextKernelPass> {
  const config = parseAgentConfig([], env);
  const labels: LabelPatch[] = [];
  const events: NodeEventInput[] = [];
  const sinks = {
    writeLabels: (patch: LabelPatch) => {
      labels.push(patch);
      return Promise.resolve();
    },
    recordEvent: (event: NodeEventInput) => {
      events.push(event);
      return Promise.resolve();
    },
  };
  const metrics = createAgentMetrics(new Registry(), config.driver);
  const deps = nextKernelPreflightDeps(config, driverKeys(config.driver, config.keyDomain), sinks, metrics, logger);
  const runningKernel = (await systemHostInfo().readHostInfo()).kernelRelease;
  const results = await preflightNextKernels(deps, runningKernel, new Map(), new AbortController().signal);
  return { runningKernel, results, labels, events };
}
