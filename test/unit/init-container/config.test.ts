import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseInitConfig, type InitConfig } from '../../../init-container/config.ts';
import { ConfigError } from '../../../shared/errors.ts';

const kubeconfigFile = join(mkdtempSync(join(tmpdir(), 'init-config-')), 'kubeconfig');
writeFileSync(kubeconfigFile, 'apiVersion: v1\nkind: Config\n');

/** A complete, valid environment as the DaemonSet sets it; each case changes what it tests. */
function anEnv(overrides: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return { NODE_NAME: 'gpu-node-1', DRIVER_NAME: 'gpu', SAFE_LOAD_ENABLED: 'true', KUBERNETES_SERVICE_HOST: '10.96.0.1', ...overrides };
}

function problemsOf(argv: string[], env: Record<string, string | undefined>): { path: string; message: string }[] {
  try {
    parseInitConfig(argv, env);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('parseInitConfig', () => {
  it.each<{ name: string; argv: string[]; env: Record<string, string | undefined>; expected: Partial<InitConfig> }>([
    {
      name: 'computes the annotation and state label from driver and default domain',
      argv: [],
      env: anEnv(),
      expected: {
        nodeName: 'gpu-node-1',
        safeLoadEnabled: true,
        annotationKey: 'nvidia.com/gpu-driver-upgrade.driver-wait-for-safe-load',
        stateLabelKey: 'nvidia.com/gpu-driver-upgrade-state',
        waitTimeoutSeconds: 0,
        kubeconfig: undefined,
        preflightModules: [],
        sysModuleRoot: '/sys/module',
        logLevel: 'info',
      },
    },
    {
      name: 'uses KEY_DOMAIN for the computed keys',
      argv: [],
      env: anEnv({ DRIVER_NAME: 'ofed', KEY_DOMAIN: 'example.org' }),
      expected: { annotationKey: 'example.org/ofed-driver-upgrade.driver-wait-for-safe-load', stateLabelKey: 'example.org/ofed-driver-upgrade-state' },
    },
    {
      name: 'SAFE_LOAD_ANNOTATION overrides the computed key and makes DRIVER_NAME optional',
      argv: [],
      env: anEnv({ DRIVER_NAME: undefined, SAFE_LOAD_ANNOTATION: 'example.org/my-gate' }),
      expected: { annotationKey: 'example.org/my-gate', stateLabelKey: undefined },
    },
    {
      name: 'flags win over environment variables, in both spellings',
      argv: ['--node-name=from-flag', '--wait-timeout-seconds', '90', '--preflight-modules', 'nvidia_uvm, nvidia ,', '--log-level=debug'],
      env: anEnv({ WAIT_TIMEOUT_SECONDS: '5', LOG_LEVEL: 'warn' }),
      expected: { nodeName: 'from-flag', waitTimeoutSeconds: 90, preflightModules: ['nvidia_uvm', 'nvidia'], logLevel: 'debug' },
    },
    {
      name: 'safe load defaults to off and then needs no credentials',
      argv: [],
      env: anEnv({ SAFE_LOAD_ENABLED: undefined, KUBERNETES_SERVICE_HOST: undefined }),
      expected: { safeLoadEnabled: false },
    },
    {
      name: 'an empty variable counts as unset',
      argv: [],
      env: anEnv({ KEY_DOMAIN: '', WAIT_TIMEOUT_SECONDS: '', PREFLIGHT_MODULES: '' }),
      expected: { annotationKey: 'nvidia.com/gpu-driver-upgrade.driver-wait-for-safe-load', waitTimeoutSeconds: 0, preflightModules: [] },
    },
    {
      name: 'a readable KUBECONFIG replaces in-cluster credentials',
      argv: [],
      env: anEnv({ KUBECONFIG: kubeconfigFile, KUBERNETES_SERVICE_HOST: undefined }),
      expected: { kubeconfig: kubeconfigFile },
    },
  ])('$name', ({ argv, env, expected }) => {
    expect(parseInitConfig(argv, env)).toMatchObject(expected);
  });

  it.each<{ name: string; argv: string[]; env: Record<string, string | undefined>; problems: { path: string; message: RegExp }[] }>([
    { name: 'missing node name', argv: [], env: anEnv({ NODE_NAME: undefined }), problems: [{ path: '--node-name / NODE_NAME', message: /downward API/ }] },
    { name: 'node name not a DNS name', argv: [], env: anEnv({ NODE_NAME: 'Node_1' }), problems: [{ path: '--node-name / NODE_NAME', message: /DNS subdomain/ }] },
    { name: 'missing driver and annotation', argv: [], env: anEnv({ DRIVER_NAME: undefined }), problems: [{ path: '--driver-name / DRIVER_NAME', message: /required unless SAFE_LOAD_ANNOTATION/ }] },
    { name: 'driver name with capitals', argv: ['--driver-name=GPU'], env: anEnv(), problems: [{ path: '--driver-name / DRIVER_NAME', message: /DNS label/ }] },
    { name: 'driver name too long for the key', argv: [], env: anEnv({ DRIVER_NAME: 'a'.repeat(30) }), problems: [{ path: '--driver-name / DRIVER_NAME', message: /too long/ }] },
    { name: 'bad key domain', argv: [], env: anEnv({ KEY_DOMAIN: 'Not A Domain' }), problems: [{ path: '--key-domain / KEY_DOMAIN', message: /DNS subdomain/ }] },
    { name: 'bad annotation key', argv: [], env: anEnv({ SAFE_LOAD_ANNOTATION: 'bad key/with space' }), problems: [{ path: '--safe-load-annotation / SAFE_LOAD_ANNOTATION', message: /annotation key/ }] },
    { name: 'safe load neither true nor false', argv: [], env: anEnv({ SAFE_LOAD_ENABLED: 'yes' }), problems: [{ path: '--safe-load-enabled / SAFE_LOAD_ENABLED', message: /"true" or "false"/ }] },
    { name: 'negative timeout', argv: [], env: anEnv({ WAIT_TIMEOUT_SECONDS: '-1' }), problems: [{ path: '--wait-timeout-seconds / WAIT_TIMEOUT_SECONDS', message: /whole number of seconds/ }] },
    { name: 'timeout with a unit', argv: ['--wait-timeout-seconds=5m'], env: anEnv(), problems: [{ path: '--wait-timeout-seconds / WAIT_TIMEOUT_SECONDS', message: /whole number/ }] },
    { name: 'timeout beyond a timer', argv: [], env: anEnv({ WAIT_TIMEOUT_SECONDS: '99999999' }), problems: [{ path: '--wait-timeout-seconds / WAIT_TIMEOUT_SECONDS', message: /at most 2147483/ }] },
    { name: 'unreadable kubeconfig', argv: [], env: anEnv({ KUBECONFIG: '/nonexistent/kubeconfig' }), problems: [{ path: '--kubeconfig / KUBECONFIG', message: /cannot read kubeconfig/ }] },
    { name: 'no credentials outside a pod', argv: [], env: anEnv({ KUBERNETES_SERVICE_HOST: undefined }), problems: [{ path: '--kubeconfig / KUBECONFIG', message: /outside a pod/ }] },
    { name: 'bad module name', argv: [], env: anEnv({ PREFLIGHT_MODULES: 'nvidia,nv/idia' }), problems: [{ path: '--preflight-modules / PREFLIGHT_MODULES', message: /module name/ }] },
    { name: 'relative module root', argv: [], env: anEnv({ SYS_MODULE_ROOT: 'sys/module' }), problems: [{ path: '--sys-module-root / SYS_MODULE_ROOT', message: /absolute path/ }] },
    { name: 'unknown log level', argv: [], env: anEnv({ LOG_LEVEL: 'verbose' }), problems: [{ path: '--log-level / LOG_LEVEL', message: /one of fatal, error/ }] },
    { name: 'unknown flag', argv: ['--node=x'], env: anEnv(), problems: [{ path: '--node', message: /unknown flag/ }] },
    { name: 'flag without value', argv: ['--node-name'], env: anEnv(), problems: [{ path: '--node-name', message: /needs a value/ }] },
    { name: 'positional argument', argv: ['wait'], env: anEnv(), problems: [{ path: 'wait', message: /unexpected argument/ }] },
  ])('reports $name with its field', ({ argv, env, problems }) => {
    const found = problemsOf(argv, env);
    expect(found).toHaveLength(problems.length);
    problems.forEach((p, i) => {
      expect(found[i]?.path).toBe(p.path);
      expect(found[i]?.message).toMatch(p.message);
    });
  });

  it('lists every problem at once, each with its field', () => {
    const found = problemsOf(['--bogus=1'], {
      NODE_NAME: '',
      DRIVER_NAME: 'GPU',
      SAFE_LOAD_ENABLED: 'maybe',
      WAIT_TIMEOUT_SECONDS: 'soon',
      LOG_LEVEL: 'loud',
    });
    expect(found.map((p) => p.path).sort()).toEqual(
      ['--bogus', '--driver-name / DRIVER_NAME', '--log-level / LOG_LEVEL', '--node-name / NODE_NAME', '--safe-load-enabled / SAFE_LOAD_ENABLED', '--wait-timeout-seconds / WAIT_TIMEOUT_SECONDS'].sort(),
    );
  });

  it('names every problem in the error message', () => {
    expect(() => parseInitConfig([], anEnv({ NODE_NAME: undefined, LOG_LEVEL: 'loud' }))).toThrow(/NODE_NAME.*LOG_LEVEL/);
  });
});
