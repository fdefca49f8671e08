import { describe, expect, it } from 'vitest';
import { parseCliArgs } from '../../../cli/parse-cli-args.ts';
import { UsageError } from '../../../cli/usage-error.ts';

const target = { kubeconfig: undefined, context: undefined, namespace: undefined, allNamespaces: false };

describe('parseCliArgs', () => {
  it.each([
    { argv: [], expected: { kind: 'help' } },
    { argv: ['--help'], expected: { kind: 'help' } },
    { argv: ['status', '-h'], expected: { kind: 'help' } },
    { argv: ['status'], expected: { kind: 'status', target, rollout: undefined, watch: false, output: 'table', width: undefined } },
    {
      argv: ['status', 'gpu', '-w', '-n', 'ops', '--context', 'prod', '--kubeconfig', '/k', '--width', '60'],
      expected: { kind: 'status', target: { kubeconfig: '/k', context: 'prod', namespace: 'ops', allNamespaces: false }, rollout: 'gpu', watch: true, output: 'table', width: 60 },
    },
    { argv: ['status', '-A', '-o', 'yaml'], expected: { kind: 'status', target: { ...target, allNamespaces: true }, rollout: undefined, watch: false, output: 'yaml', width: undefined } },
    { argv: ['why', 'node-1', '--driver', 'ofed'], expected: { kind: 'why', target, node: 'node-1', driver: 'ofed', width: undefined } },
    { argv: ['pause', '-n', 'x'], expected: { kind: 'pause', target: { ...target, namespace: 'x' }, rollout: undefined } },
    { argv: ['resume', 'gpu'], expected: { kind: 'resume', target, rollout: 'gpu' } },
    { argv: ['retry', 'n1'], expected: { kind: 'retry', target, node: 'n1', driver: undefined } },
    { argv: ['skip', 'n1'], expected: { kind: 'skip', target, node: 'n1', driver: undefined } },
    { argv: ['unskip', 'n1', '--driver=gpu'], expected: { kind: 'unskip', target, node: 'n1', driver: 'gpu' } },
  ])('parses $argv', ({ argv, expected }) => {
    expect(parseCliArgs(argv)).toEqual(expected);
  });

  it.each([
    { argv: ['status', '--bogus'], message: /Unknown option '--bogus'/ },
    { argv: ['status', '-o', 'xml'], message: /-o must be json or yaml, not "xml"/ },
    { argv: ['status', '--width', '5'], message: /--width must be a whole number of columns from 20 to 1000/ },
    { argv: ['status', 'a', 'b'], message: /status takes at most 1 ROLLOUT, got 2/ },
    { argv: ['status', '-n', 'a', '-A'], message: /-n and -A exclude each other/ },
    { argv: ['why'], message: /why takes exactly one NODE/ },
    { argv: ['retry', 'a', 'b'], message: /retry takes exactly one NODE/ },
    { argv: ['pause', '-w'], message: /pause does not take -w/ },
    { argv: ['skip', 'n', '-o', 'json'], message: /skip does not take -o/ },
    { argv: ['frobnicate'], message: /unknown command "frobnicate"/ },
    { argv: ['approve', 'a', 'b'], message: /approve takes at most 1 ROLLOUT, got 2/ },
    { argv: ['approve', '-w'], message: /approve does not take -w/ },
  ])('refuses $argv with a UsageError (exit 2)', ({ argv, message }) => {
    expect(() => parseCliArgs(argv)).toThrow(UsageError);
    expect(() => parseCliArgs(argv)).toThrow(message);
  });
});
