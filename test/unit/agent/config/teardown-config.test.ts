import { describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { agentConfigProblems as problems, BASE_AGENT_ENV as base } from './agent-config-problems.ts';

describe('teardown settings', () => {
  it('defaults: no holders, nsenter into PID 1, SR-IOV teardown on, vfio-pci unbound, /dev/vfio; preflight on hourly', () => {
    expect(parseAgentConfig([], base)).toMatchObject({
      holders: [],
      hostCommandPrefix: ['nsenter', '--target', '1', '--mount', '--uts', '--ipc', '--net', '--pid', '--'],
      sriovTeardown: true,
      unbindDrivers: ['vfio-pci'],
      vfioDir: '/dev/vfio',
      nextKernelPreflight: true,
      nextKernelIntervalMs: 3_600_000,
    });
  });

  it('parses the GPU example of agent/README.md', () => {
    const config = parseAgentConfig([], {
      ...base,
      STOP_BEFORE_UNLOAD: JSON.stringify([
        { name: 'nvidia-persistenced', check: ['systemctl', 'is-active', '--quiet', 'nvidia-persistenced'], stop: ['systemctl', 'stop', 'nvidia-persistenced'], start: ['systemctl', 'start', 'nvidia-persistenced'], timeoutSeconds: 30 },
        { name: 'nv-fabricmanager', on: 'image', stop: ['pkill', '-x', 'nv-fabricmanager'], start: ['nv-fabricmanager', '-c', '/usr/share/nvidia/nvswitch/fabricmanager.cfg'] },
      ]),
    });
    expect(config.holders).toEqual([
      { name: 'nvidia-persistenced', on: 'host', check: ['systemctl', 'is-active', '--quiet', 'nvidia-persistenced'], stop: ['systemctl', 'stop', 'nvidia-persistenced'], start: ['systemctl', 'start', 'nvidia-persistenced'], timeoutMs: 30_000 },
      { name: 'nv-fabricmanager', on: 'image', check: undefined, stop: ['pkill', '-x', 'nv-fabricmanager'], start: ['nv-fabricmanager', '-c', '/usr/share/nvidia/nvswitch/fabricmanager.cfg'], timeoutMs: 60_000 },
    ]);
  });

  it('names every bad field at once', () => {
    expect(
      problems({
        STOP_BEFORE_UNLOAD: JSON.stringify([{ name: 'a', stop: [], start: ['x'], on: 'vm', timeoutSeconds: 0 }, { name: 'a', stop: ['x'], start: ['y'], when: 'now' }, 'nvlsm']),
        UNBIND_DRIVERS: 'vfio-pci,bad/name',
        SRIOV_TEARDOWN: 'maybe',
        NEXT_KERNEL_INTERVAL_SECONDS: '-5',
      }),
    ).toEqual([
      expect.stringMatching(/^--next-kernel-interval-seconds \/ NEXT_KERNEL_INTERVAL_SECONDS: /),
      expect.stringMatching(/^--sriov-teardown \/ SRIOV_TEARDOWN: /),
      '--stop-before-unload / STOP_BEFORE_UNLOAD: [0].on: must be "host" or "image"',
      '--stop-before-unload / STOP_BEFORE_UNLOAD: [0].stop: required: a command as a non-empty list of non-empty strings, e.g. ["systemctl", "stop", "nvidia-persistenced"]',
      '--stop-before-unload / STOP_BEFORE_UNLOAD: [0].timeoutSeconds: must be a positive number of seconds',
      '--stop-before-unload / STOP_BEFORE_UNLOAD: [1].when: unknown field',
      '--stop-before-unload / STOP_BEFORE_UNLOAD: [1].name: "a" is listed twice',
      '--stop-before-unload / STOP_BEFORE_UNLOAD: [2]: must be an object',
      '--unbind-drivers / UNBIND_DRIVERS: not driver names: bad/name',
    ]);
    expect(problems({ STOP_BEFORE_UNLOAD: '[{' })).toEqual([expect.stringMatching(/^--stop-before-unload \/ STOP_BEFORE_UNLOAD: not JSON: /)]);
  });
});
