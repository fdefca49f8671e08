import { resolve } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { boundaryViolation } from '../../../lint/import-boundaries.ts';

const ROOT = resolve(import.meta.dirname, '../../..');

describe('boundaryViolation (the rule, case by case)', () => {
  it.each([
    { file: 'coordinator/plan/x.ts', specifier: '@kubernetes/client-node' },
    { file: 'coordinator/plan/x.ts', specifier: 'execa' },
    { file: 'coordinator/plan/x.ts', specifier: 'node:fs/promises' },
    { file: 'coordinator/plan/states/x.ts', specifier: 'fs' },
    { file: 'coordinator/plan/states/x.ts', specifier: 'node:child_process' },
    { file: 'coordinator/plan/x.ts', specifier: '../cluster/build-snapshot.ts' },
    { file: 'coordinator/plan/x.ts', specifier: '../../shared/errors.ts' },
    { file: 'agent/kernel/x.ts', specifier: '../../coordinator/plan/node-patch.ts' },
    { file: 'coordinator/x.ts', specifier: '../agent/config/agent-config.ts' },
    { file: 'init-container/x.ts', specifier: '../agent/report/ready-file.ts' },
    { file: 'init-container/x.ts', specifier: '../coordinator/delay.ts' },
    { file: 'shared/kube/x.ts', specifier: '../../agent/x.ts' },
    { file: 'shared/x.ts', specifier: '../init-container/clock.ts' },
    { file: 'agent/x.ts', specifier: '../test/doubles/simulated-kernel.ts' },
    { file: 'coordinator/execute/x.ts', specifier: '../../test/doubles/in-memory-cluster-writer.ts' },
    { file: 'shared/x.ts', specifier: '../test/bed/control-plane.ts' },
    { file: 'agent/x.ts', specifier: '../demo/process-kubelet.ts' },
    { file: 'agent/kernel/plan/load-plan.ts', specifier: '../../../shared/kmod/read-loaded-module.ts' },
    { file: 'agent/kernel/plan/decide-reload.ts', specifier: '../reload-driver.ts' },
    { file: 'shared/keys.ts', specifier: './logger.ts' },
    { file: 'shared/backoff.ts', specifier: 'node:timers/promises' },
    { file: 'coordinator/policy/label-selector.ts', specifier: '@kubernetes/client-node' },
    { file: 'coordinator/policy/driver-rollout-spec.ts', specifier: '../cluster/build-snapshot.ts' },
    { file: 'agent/teardown/plan-device-teardown.ts', specifier: 'node:perf_hooks' },
    { file: 'agent/detect/device-selector.ts', specifier: 'undici' },
    { file: 'cli/render-status.ts', specifier: '../coordinator/reconcile/reconciler.ts' },
    { file: 'cli/run-cli.ts', specifier: '../agent/config/agent-config.ts' },
    { file: 'agent/run-agent.ts', specifier: '../cli/rollout-view.ts' },
    { file: 'coordinator/main.ts', specifier: '../cli/render-status.ts' },
  ])('refuses $specifier in $file', ({ file, specifier }) => {
    expect(boundaryViolation(file, specifier)).toMatch(/must not import/);
  });

  it.each([
    { file: 'coordinator/plan/x.ts', specifier: './states/handle-drain.ts' },
    { file: 'coordinator/plan/states/x.ts', specifier: '../../policy/driver-rollout-spec.ts' },
    { file: 'coordinator/plan/x.ts', specifier: '../../shared/keys.ts' },
    { file: 'coordinator/plan/x.ts', specifier: 'node:path' },
    { file: 'coordinator/execute/x.ts', specifier: '@kubernetes/client-node' },
    { file: 'coordinator/execute/x.ts', specifier: '../plan/node-patch.ts' },
    { file: 'agent/x.ts', specifier: '../shared/errors.ts' },
    { file: 'init-container/x.ts', specifier: '../shared/abortable-sleep.ts' },
    { file: 'shared/kmod/x.ts', specifier: '../fs/if-exists.ts' },
    { file: 'demo/x.ts', specifier: '../test/doubles/simulated-agent-main.ts' },
    { file: 'bench/x.ts', specifier: '../test/unit/coordinator/plan/fixtures.ts' },
    { file: 'test/doubles/x.ts', specifier: '../../agent/assemble-agent.ts' },
    { file: 'agent/kernel/plan/load-plan.ts', specifier: '../../../shared/kmod/loaded-module.ts' },
    { file: 'agent/kernel/plan/find-failed-module.ts', specifier: '../kernel-port.ts' },
    { file: 'coordinator/policy/driver-rollout-spec.ts', specifier: 'zod' },
    { file: 'coordinator/policy/driver-rollout-spec.ts', specifier: '../../shared/errors.ts' },
    { file: 'agent/kernel/reload-driver.ts', specifier: '../../shared/kmod/read-loaded-module.ts' },
    { file: 'cli/read-cluster.ts', specifier: '../coordinator/policy/driver-rollout-spec.ts' },
    { file: 'cli/run-cli.ts', specifier: '../shared/kube/api-error.ts' },
  ])('allows $specifier in $file', ({ file, specifier }) => {
    expect(boundaryViolation(file, specifier)).toBeUndefined();
  });
});

describe('eslint.config.ts enforces the boundaries', () => {
  // The project's own configuration, typed linting included, on planted files: what `npm run lint` does.
  const eslint = new ESLint({ cwd: ROOT });

  async function boundaryMessages(file: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: resolve(ROOT, file) });
    return (result?.messages ?? []).filter((m) => m.ruleId === 'boundaries/imports').map((m) => m.message);
  }

  it('reports a planted Kubernetes client import in the planner, and a double imported by the agent', async () => {
    expect(await boundaryMessages('coordinator/plan/plan-upgrades.ts', "import { CoreV1Api } from '@kubernetes/client-node';\nexport const api = CoreV1Api;\n")).toEqual([
      expect.stringContaining('coordinator/plan/plan-upgrades.ts must not import @kubernetes/client-node'),
    ]);
    expect(
      await boundaryMessages('agent/assemble-agent.ts', "export { SimulatedKernel } from '../test/doubles/simulated-kernel.ts';\nexport const later = import('../coordinator/main.ts');\n"),
    ).toEqual([expect.stringContaining('must not import test/doubles/simulated-kernel.ts'), expect.stringContaining('must not import coordinator/main.ts')]);
  }, 120_000);

  it('passes an allowed import', async () => {
    expect(await boundaryMessages('agent/assemble-agent.ts', "import { driverKeys } from '../shared/keys.ts';\nexport const keys = driverKeys;\n")).toEqual([]);
  }, 120_000);
});
