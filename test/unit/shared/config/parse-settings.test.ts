import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { parseSettings } from '../../../../shared/config/parse-settings.ts';
import { environmentVariables, settingLabels, type SettingsTable } from '../../../../shared/config/settings-table.ts';
import { dnsLabel, dnsSubdomain, isQualifiedName } from '../../../../shared/config/validators.ts';

const TABLE = {
  source: 'test configuration',
  settings: {
    'node-name': z.string({ error: 'required' }),
    namespace: z.string().default(''),
    'retry-seconds': z.coerce.number().positive().default(10),
  },
  envNames: { namespace: 'WATCH_NAMESPACE' },
} as const satisfies SettingsTable;

describe('a settings table', () => {
  it('names each variable after its flag, unless the table names another', () => {
    expect(environmentVariables(TABLE)).toEqual(['NODE_NAME', 'WATCH_NAMESPACE', 'RETRY_SECONDS']);
    expect(settingLabels(TABLE)).toEqual(['--node-name / NODE_NAME', '--namespace / WATCH_NAMESPACE', '--retry-seconds / RETRY_SECONDS']);
  });
});

describe('parseSettings', () => {
  it.each([
    { name: 'a variable', argv: [], env: { NODE_NAME: 'n1' }, values: { 'node-name': 'n1', namespace: '', 'retry-seconds': 10 } },
    { name: 'a flag wins over its variable', argv: ['--node-name', 'n2'], env: { NODE_NAME: 'n1' }, values: { 'node-name': 'n2' } },
    { name: '--flag=value', argv: ['--retry-seconds=2.5'], env: { NODE_NAME: 'n1' }, values: { 'retry-seconds': 2.5 } },
    { name: 'the named variable', argv: [], env: { NODE_NAME: 'n1', WATCH_NAMESPACE: 'a,b' }, values: { namespace: 'a,b' } },
    { name: 'an empty variable counts as unset', argv: [], env: { NODE_NAME: 'n1', RETRY_SECONDS: '' }, values: { 'retry-seconds': 10 } },
  ])('reads $name', ({ argv, env, values }) => {
    const parsed = parseSettings(TABLE, argv, env);
    expect(parsed.problems).toEqual([]);
    expect(parsed.values).toMatchObject(values);
  });

  it.each([
    { name: 'a missing setting', argv: [], env: {}, problems: [{ path: '--node-name / NODE_NAME', message: /^required$/ }] },
    { name: 'an unknown flag and its value', argv: ['--node', 'x'], env: { NODE_NAME: 'n1' }, problems: [{ path: '--node', message: /^unknown flag; known flags: --node-name, --namespace, --retry-seconds$/ }] },
    { name: 'a positional argument', argv: ['wait', '--node-name=n2'], env: {}, problems: [{ path: 'wait', message: /^unexpected argument/ }] },
    { name: 'a flag without a value', argv: ['--node-name'], env: { NODE_NAME: 'n1' }, problems: [{ path: '--node-name', message: /^needs a value$/ }] },
    {
      name: 'every bad setting at once',
      argv: ['--retry-seconds', '-1'],
      env: {},
      problems: [{ path: '--node-name / NODE_NAME', message: /^required$/ }, { path: '--retry-seconds / RETRY_SECONDS', message: />0/ }],
    },
  ])('reports $name', ({ argv, env, problems }) => {
    const found = parseSettings(TABLE, argv, env).problems;
    expect(found.map((p) => p.path)).toEqual(problems.map((p) => p.path));
    problems.forEach((p, i) => {
      expect(found[i]?.message).toMatch(p.message);
    });
  });

  it('gives a bad setting its default, so checks across settings still run', () => {
    expect(parseSettings(TABLE, [], { NODE_NAME: 'n1', RETRY_SECONDS: 'soon' }).values['retry-seconds']).toBe(10);
  });
});

describe('the shared validators', () => {
  it.each([
    { value: 'gpu', label: true, subdomain: true },
    { value: 'gpu-node-1.example.com', label: false, subdomain: true },
    { value: 'GPU', label: false, subdomain: false },
    { value: 'a'.repeat(64), label: false, subdomain: true },
    { value: '-gpu', label: false, subdomain: false },
  ])('$value: DNS label $label, DNS subdomain $subdomain', ({ value, label, subdomain }) => {
    expect(dnsLabel.safeParse(value).success).toBe(label);
    expect(dnsSubdomain.safeParse(value).success).toBe(subdomain);
  });

  it.each([
    { key: 'nvidia.com/gpu-driver-upgrade.wait-for-safe-load', valid: true },
    { key: 'plain-name', valid: true },
    { key: 'Bad Prefix/name', valid: false },
    { key: `nvidia.com/${'a'.repeat(64)}`, valid: false },
  ])('$key is a label or annotation key: $valid', ({ key, valid }) => {
    expect(isQualifiedName(key)).toBe(valid);
  });
});
