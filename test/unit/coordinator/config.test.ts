import { describe, expect, it } from 'vitest';
import { parseCoordinatorConfig } from '../../../coordinator/config.ts';
import { ConfigError } from '../../../shared/errors.ts';

describe('parseCoordinatorConfig', () => {
  it('takes the in-cluster defaults from the downward API variables', () => {
    const config = parseCoordinatorConfig([], { POD_NAME: 'coordinator-7d9-abc', POD_NAMESPACE: 'driver-rollout' });
    expect(config).toEqual({
      kubeconfig: undefined,
      namespaces: [],
      leaseName: 'driver-rollout-coordinator',
      leaseNamespace: 'driver-rollout',
      identity: 'coordinator-7d9-abc',
      leaseDurationSeconds: 15,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      metricsPort: 8080,
      logLevel: 'info',
    });
  });

  it('lets flags win over variables and splits the namespace list', () => {
    const config = parseCoordinatorConfig(
      ['--namespace', 'gpu-operator, nvidia-network-operator', '--metrics-port', '0', '--lease-duration-seconds', '3',
        '--renew-deadline-seconds', '2', '--retry-period-seconds', '0.2', '--log-level', 'debug'],
      { WATCH_NAMESPACE: 'ignored', METRICS_PORT: '9999', KUBECONFIG: '/tmp/kc' },
    );
    expect(config).toMatchObject({
      kubeconfig: '/tmp/kc',
      namespaces: ['gpu-operator', 'nvidia-network-operator'],
      metricsPort: 0,
      leaseDurationSeconds: 3,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 200,
      logLevel: 'debug',
    });
  });

  it('reads the lease settings from variables too (LEASE_DURATION_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_PERIOD_SECONDS)', () => {
    const config = parseCoordinatorConfig([], { LEASE_DURATION_SECONDS: '4', RENEW_DEADLINE_SECONDS: '3', RETRY_PERIOD_SECONDS: '0.5' });
    expect(config).toMatchObject({ leaseDurationSeconds: 4, renewDeadlineMs: 3_000, retryPeriodMs: 500 });
  });

  it('reports every problem at once, naming the flag or variable', () => {
    const parse = (): unknown => parseCoordinatorConfig(['--metrics-port', '70000', '--log-level', 'loud', '--lease-name', 'Bad_Name'], {});
    expect(parse).toThrow(ConfigError);
    try {
      parse();
    } catch (error) {
      expect((error as ConfigError).problems.map((p) => p.path)).toEqual([
        '--lease-name / LEASE_NAME',
        '--metrics-port / METRICS_PORT',
        '--log-level / LOG_LEVEL',
      ]);
    }
  });

  it.each([
    { name: 'renew deadline not below the lease duration', argv: ['--lease-duration-seconds', '5', '--renew-deadline-seconds', '5'], path: '--renew-deadline-seconds / RENEW_DEADLINE_SECONDS' },
    { name: 'an unknown flag', argv: ['--frobnicate'], path: '--frobnicate' },
  ])('rejects $name', ({ argv, path }) => {
    expect(() => parseCoordinatorConfig(argv, {})).toThrow(expect.objectContaining({ problems: [expect.objectContaining({ path })] }) as Error);
  });
});
