import { describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { agentConfigProblems as problems, BASE_AGENT_ENV as base } from './agent-config-problems.ts';

describe('driver root settings', () => {
  it("default: no root (no version guard, no daemons, nothing published); when there is one, NVIDIA's path and marker, no check, pid files under /var/run", () => {
    expect(parseAgentConfig([], base)).toMatchObject({
      driverRootDir: undefined,
      driverRootPath: '/run/nvidia/driver',
      driverReadyMarker: '/run/nvidia/validations/.driver-ctr-ready',
      driverRootCheck: [],
      daemonRunDir: '/var/run',
    });
    expect(parseAgentConfig([], { ...base, DAEMON_RUN_DIR: '/run' }).daemonRunDir).toBe('/run');
  });

  it('the NVIDIA presets: the image root, its check, a path given with a trailing slash', () => {
    expect(parseAgentConfig([], { ...base, DRIVER_ROOT_DIR: '/opt/driver-root', DRIVER_ROOT_PATH: '/run/nvidia/driver/', DRIVER_ROOT_CHECK: 'nvidia-smi' })).toMatchObject({
      driverRootDir: '/opt/driver-root',
      driverRootPath: '/run/nvidia/driver',
      driverRootCheck: ['nvidia-smi'],
    });
  });

  it("the marker sits beside the root's path as in NVIDIA's layout, unless given", () => {
    expect(parseAgentConfig([], { ...base, DRIVER_ROOT_PATH: '/run/driver-rollout/nic/driver' }).driverReadyMarker).toBe('/run/driver-rollout/nic/validations/.driver-ctr-ready');
    expect(parseAgentConfig([], { ...base, DRIVER_READY_MARKER: '/run/x/.ready' }).driverReadyMarker).toBe('/run/x/.ready');
  });

  it('refuses relative paths and publishing over /, naming the setting', () => {
    expect(problems({ DRIVER_ROOT_DIR: 'opt/driver-root', DRIVER_READY_MARKER: 'ready', DAEMON_RUN_DIR: 'run' })).toEqual([
      '--driver-root-dir / DRIVER_ROOT_DIR: must be an absolute path: opt/driver-root',
      '--driver-ready-marker / DRIVER_READY_MARKER: must be an absolute path: ready',
      '--daemon-run-dir / DAEMON_RUN_DIR: must be an absolute path: run',
    ]);
    expect(problems({ DRIVER_ROOT_DIR: '/opt/driver-root', DRIVER_ROOT_PATH: '/' })).toEqual(['--driver-root-path / DRIVER_ROOT_PATH: must not be /']);
  });
});
