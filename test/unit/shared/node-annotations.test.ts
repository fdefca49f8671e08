import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { driverFingerprint, renderLoadedDriver } from '../../../shared/driver-identity.ts';
import { driverKeys, type DriverKeys } from '../../../shared/keys.ts';
import { renderSignatureVerdict } from '../../../shared/module-signature-verdict.ts';
import { renderKernelSignaturePolicy } from '../../../shared/kernel-signature-policy.ts';
import { NODE_ANNOTATIONS, NodeAnnotationProblem, readNodeAnnotation, type NodeAnnotation } from '../../../shared/node-annotations.ts';

const KEYS = driverKeys('gpu');
const NODE = 'gpu-1';

const fingerprint = driverFingerprint({ version: '570.86.15', modules: ['nvidia'], loadPlan: 'nvidia', loadOptional: [], parameters: {} });
const loaded = renderLoadedDriver({ pod: 'gpu-operator/gpu-driver-x1', fingerprint });
const kernelPolicy = { kernel: '6.1.0-50-amd64', enforcedBy: ['Secure Boot'], keys: [{ name: 'Debian Secure Boot CA', id: '6ccece7e' }] };
const verdict = { fingerprint, kernel: '6.1.0-50-amd64', enforcedBy: ['module.sig_enforce'], untrusted: [{ module: 'nvidia', signedBy: 'unsigned' }], trustedKeys: [] };

/**
 * Every per-node annotation: a good value and what it reads as, and a bad value with what the
 * problem says (null where every string is a value: free text).
 */
const CASES: readonly { annotation: NodeAnnotation; good: string; reads: unknown; bad: string | null; says?: RegExp }[] = [
  { annotation: 'waitForSafeLoad', good: 'true', reads: 'true', bad: null },
  { annotation: 'initialStateUnschedulable', good: 'true', reads: 'true', bad: null },
  { annotation: 'waitForPodCompletionStartTime', good: '1700000000', reads: 1_700_000_000_000, bad: 'soon', says: /is not unix seconds: "soon"/ },
  { annotation: 'validationStartTime', good: ' 1700000000 ', reads: 1_700_000_000_000, bad: '-5', says: /is not unix seconds: "-5"/ },
  { annotation: 'upgradeRequested', good: 'true', reads: true, bad: 'yes', says: /is not "true" or "false": "yes"/ },
  { annotation: 'upgradeReason', good: 'drain timed out', reads: 'drain timed out', bad: null },
  { annotation: 'stateStartTime', good: '1700000001', reads: 1_700_000_001_000, bad: '1.7e9', says: /is not unix seconds: "1.7e9"/ },
  { annotation: 'upgradeStartTime', good: '0', reads: 0, bad: '', says: /is not unix seconds: ""/ },
  { annotation: 'drainStartTime', good: '1700000002', reads: 1_700_000_002_000, bad: '2023-11-14T22:13:20Z', says: /is not unix seconds/ },
  { annotation: 'podDeletionStartTime', good: '1700000003', reads: 1_700_000_003_000, bad: 'NaN', says: /is not unix seconds: "NaN"/ },
  { annotation: 'podRestartStartTime', good: '1700000004', reads: 1_700_000_004_000, bad: '17e8', says: /is not unix seconds/ },
  { annotation: 'driverFailingSince', good: '1700000005', reads: 1_700_000_005_000, bad: 'x1', says: /is not unix seconds/ },
  { annotation: 'failedRevision', good: '7d9f8c', reads: '7d9f8c', bad: null },
  {
    annotation: 'pausedOperands',
    good: '{"nvidia.com/gpu.deploy.device-plugin":"true"}',
    reads: { 'nvidia.com/gpu.deploy.device-plugin': 'true' },
    bad: '{"nvidia.com/gpu.deploy.dcgm":true}',
    says: /holds a value that is not a string for nvidia.com\/gpu.deploy.dcgm/,
  },
  { annotation: 'operandPauseStartTime', good: '1700000006', reads: 1_700_000_006_000, bad: 'later', says: /is not unix seconds/ },
  { annotation: 'clientsRecreated', good: 'monitoring/dcgm-exporter', reads: new Set(['monitoring/dcgm-exporter']), bad: 'dcgm-exporter', says: /not <namespace>\/<name>: "dcgm-exporter"/ },
  { annotation: 'clientsStopped', good: 'a/p1,b/p2', reads: new Set(['a/p1', 'b/p2']), bad: 'a/p1,,b/p2', says: /not <namespace>\/<name>/ },
  { annotation: 'driverLoaded', good: loaded, reads: { pod: 'gpu-operator/gpu-driver-x1', fingerprint, version: '570.86.15' }, bad: '{"pod":"a/b"}', says: /is not the agent's/ },
  {
    annotation: 'moduleSignatures',
    good: renderSignatureVerdict(verdict),
    reads: verdict,
    bad: '{"kernel":"6.1.0-50-amd64"}',
    says: /is not the agent's module-signature verdict/,
  },
  {
    annotation: 'kernelSignaturePolicy',
    good: renderKernelSignaturePolicy(kernelPolicy),
    reads: kernelPolicy,
    bad: '{"kernel":"6.1.0-50-amd64","enforcedBy":[],"keys":[{"name":"no id"}]}',
    says: /is not the agent's kernel signature policy/,
  },
  { annotation: 'restartOnly', good: 'false', reads: false, bad: 'True', says: /is not "true" or "false": "True"/ },
  { annotation: 'lastStartTime', good: '1700000007', reads: 1_700_000_007_000, bad: 'now', says: /is not unix seconds: "now"/ },
  { annotation: 'upgradeDoneTime', good: '1700000008', reads: 1_700_000_008_000, bad: '-1', says: /is not unix seconds: "-1"/ },
  { annotation: 'canary', good: 'driver=7d9f8c', reads: 'driver=7d9f8c', bad: null },
  { annotation: 'canaryFailed', good: 'node NotReady during the soak', reads: 'node NotReady during the soak', bad: null },
  { annotation: 'notReadyFrozen', good: '1700000007', reads: 1_700_000_007_000, bad: 'now', says: /is not unix seconds: "now"/ },
  { annotation: 'notReadyCountedFrom', good: '1700000008', reads: 1_700_000_008_000, bad: '-1', says: /is not unix seconds: "-1"/ },
  { annotation: 'stoppedFor', good: 'ofed', reads: 'ofed', bad: null },
];

/** The DriverKeys that are no node annotation: labels, the pod condition, and the key set's own parts. */
const NOT_NODE_ANNOTATIONS: readonly (keyof DriverKeys)[] = [
  'domain',
  'driver',
  'upgradeState',
  'upgradeSkip',
  'drainSkip',
  'devicePresent',
  'deviceCount',
  'driverVersion',
  'driverReady',
  'nextKernel',
  'nextKernelFailed',
  'driverReadyCondition',
];

const read = (annotation: NodeAnnotation, value: string | undefined): unknown =>
  readNodeAnnotation({ name: NODE, annotations: value === undefined ? {} : { [KEYS[annotation]]: value } }, KEYS, annotation);

describe('readNodeAnnotation', () => {
  it('has a schema for every per-node annotation of DriverKeys, and a case here for each', () => {
    const annotations = Object.keys(KEYS).filter((k) => !(NOT_NODE_ANNOTATIONS as readonly string[]).includes(k));
    expect(Object.keys(NODE_ANNOTATIONS).sort()).toEqual(annotations.sort());
    expect(CASES.map((c) => c.annotation).sort()).toEqual(annotations.sort());
  });

  it.each(CASES)('$annotation: a good value reads as its value', ({ annotation, good, reads }) => {
    expect(read(annotation, good)).toEqual(reads);
  });

  it.each(CASES.filter((c) => c.bad !== null))('$annotation: a bad value ($bad) is a problem naming the node, the key and what is wrong', ({ annotation, bad, says }) => {
    const problem = read(annotation, bad ?? '');
    expect(problem).toBeInstanceOf(NodeAnnotationProblem);
    const { object, key, what, message } = problem as NodeAnnotationProblem;
    expect({ object, key }).toEqual({ object: `node/${NODE}`, key: KEYS[annotation] });
    expect(what).toMatch(says ?? /./);
    expect(message).toBe(`node/${NODE}: annotation ${KEYS[annotation]} ${what}`);
  });

  it.each(CASES.filter((c) => c.bad === null))('$annotation: any text is a value, the empty one included', ({ annotation }) => {
    expect(read(annotation, '')).toBe('');
  });

  it.each(CASES)('$annotation: absent reads as undefined', ({ annotation }) => {
    expect(read(annotation, undefined)).toBeUndefined();
  });

  it('reads an empty comma list as no entries', () => {
    expect(read('clientsStopped', '')).toEqual(new Set());
  });

  it.each([
    { what: 'not JSON', raw: '{"nvidia.com/gpu.deploy.device-plugin": "true"', says: /is not JSON/ },
    { what: 'a JSON array', raw: '["nvidia.com/gpu.deploy.device-plugin"]', says: /is not a JSON object of label values/ },
    { what: 'JSON null', raw: 'null', says: /is not a JSON object of label values/ },
  ])('pausedOperands: $what is a problem, never "nothing paused"', ({ raw, says }) => {
    expect((read('pausedOperands', raw) as NodeAnnotationProblem).what).toMatch(says);
  });

  it('gives a value or a problem on any text, for every annotation, never a crash or a hang', () => {
    const text = fc.oneof(
      fc.string({ maxLength: 60 }),
      fc.json(),
      fc.tuple(fc.constantFrom(' ', ',', '/', '{', '"', '0'), fc.integer({ min: 1_000, max: 20_000 })).map(([c, n]) => c.repeat(n)),
    );
    fc.assert(
      fc.property(fc.constantFrom(...(Object.keys(NODE_ANNOTATIONS) as NodeAnnotation[])), text, (annotation, raw) => {
        const value = read(annotation, raw);
        expect(value).not.toBeUndefined();
        if (value instanceof NodeAnnotationProblem) expect(value.key).toBe(KEYS[annotation]);
      }),
      { numRuns: 300 },
    );
  });
});
