import { describe, expect, it } from 'vitest';
import { agentEnvironmentVariables } from '../../../agent/config/parse-agent-config.ts';
import { ConfigError } from '../../../shared/errors.ts';
import { parseSimulatedKernelSettings } from '../../doubles/simulated-kernel-settings.ts';

describe('the simulated kernel settings (test entry point only)', () => {
  it('are not settings of the production agent', () => {
    expect(agentEnvironmentVariables().filter((v) => v.startsWith('SIMULATED_'))).toEqual([]);
  });

  it.each([
    { name: 'flags, taken out of the agent arguments', argv: ['--kernel', 'simulated', '--simulated-load-seconds', '2.5', '--simulated-device-dir=/tmp/dev', '--node-name', 'kwok-1'], env: {} },
    { name: 'variables', argv: ['--kernel', 'simulated', '--node-name', 'kwok-1'], env: { SIMULATED_LOAD_SECONDS: '2.5', SIMULATED_DEVICE_DIR: '/tmp/dev' } },
  ])('read from $name', ({ argv, env }) => {
    const { settings, agentArgv } = parseSimulatedKernelSettings(argv, env);
    expect(settings).toEqual({ kernelRelease: undefined, loadMs: 2500, initFailures: {}, deviceDir: '/tmp/dev' });
    expect(agentArgv).toEqual(['--kernel', 'simulated', '--node-name', 'kwok-1']);
  });

  it('reads init failures as module:errno text, and names a bad one', () => {
    const { settings } = parseSimulatedKernelSettings([], { SIMULATED_INIT_FAILURE: 'drsample_core:No such device, drsample_net: Invalid argument' });
    expect(settings.initFailures).toEqual({ drsample_core: 'No such device', drsample_net: 'Invalid argument' });
    const error: unknown = (() => {
      try {
        return parseSimulatedKernelSettings(['--simulated-load-seconds', '-1'], { SIMULATED_INIT_FAILURE: 'drsample_core' });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map((p) => p.path)).toEqual(['--simulated-load-seconds / SIMULATED_LOAD_SECONDS', '--simulated-init-failure / SIMULATED_INIT_FAILURE']);
  });
});
