/**
 * manifests/driverrollout-crd.yaml and parseDriverRolloutSpec must agree. This evaluates the CRD's
 * OpenAPI schema (the subset it uses) and its CEL rules (each emulated below, keyed by its exact
 * text, so a rule added or changed in the YAML fails here until it is emulated) on the shared
 * samples, compares the API server's defaulting with zod's, and checks that the planner's status
 * fits the status schema (nothing pruned) and feeds the printer columns. The same samples were run
 * against the real kube-apiserver; the integration tests install the CRD there.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DRIVER_ROLLOUT_GROUP, DRIVER_ROLLOUT_KIND, DRIVER_ROLLOUT_PLURAL, DRIVER_ROLLOUT_VERSION, parseDriverRolloutSpec } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { toStoredStatus } from '../../../../coordinator/status/stored-status.ts';
import { aCluster, aNode, aPolicy, KEYS, planAt, secondsAgo } from '../plan/fixtures.ts';
import { SPEC_SAMPLES } from './spec-samples.ts';

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  minimum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  minItems?: number;
  maxProperties?: number;
  pattern?: string;
  default?: unknown;
  nullable?: boolean;
  anyOf?: Schema[];
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: { rule: string; message: string; fieldPath?: string }[];
}

interface Crd {
  metadata: { name: string };
  spec: {
    group: string;
    names: { kind: string; plural: string };
    versions: { name: string; subresources?: { status?: object }; additionalPrinterColumns: { name: string; jsonPath: string }[]; schema: { openAPIV3Schema: Schema } }[];
  };
}

const crd = parse(readFileSync(new URL('../../../../manifests/driverrollout-crd.yaml', import.meta.url), 'utf8')) as Crd;
const version = crd.spec.versions[0];
if (version === undefined) throw new Error('the CRD has no version');
const root = version.schema.openAPIV3Schema;
const specSchema = root.properties?.spec ?? {};
const statusSchema = root.properties?.status ?? {};

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The CEL rules of the CRD, emulated. Keyed by the rule's exact text. */
const CEL: Record<string, (self: Json) => boolean> = {
  "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0": (self) => {
    const e = self as { operator: string; values?: unknown[] };
    return ['In', 'NotIn'].includes(e.operator) ? (e.values?.length ?? 0) > 0 : (e.values?.length ?? 0) === 0;
  },
  '(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)': (self) => {
    const s = self as { matchLabels?: object; matchExpressions?: unknown[] };
    return Object.keys(s.matchLabels ?? {}).length > 0 || (s.matchExpressions?.length ?? 0) > 0;
  },
  "type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')": (self) =>
    typeof self === 'number' ? self >= 0 : /^(100|[1-9]?[0-9])%$/.test(String(self)),
  "self != 'default'": (self) => self !== 'default',
  'self.start != self.end': (self) => (self as { start: unknown }).start !== (self as { end: unknown }).end,
  "type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')": (self) =>
    typeof self === 'number' ? self >= 1 : /^(100|[1-9][0-9]?)%$/.test(String(self)),
  'has(self.secretKeyRef) != has(self.configMapKeyRef)': (self) => {
    const ca = self as { secretKeyRef?: object; configMapKeyRef?: object };
    return (ca.secretKeyRef !== undefined) !== (ca.configMapKeyRef !== undefined);
  },
  "!has(self.tls) || self.url.startsWith('https://')": (self) => {
    const gate = self as { tls?: object; url: string };
    return gate.tls === undefined || gate.url.startsWith('https://');
  },
};

function typeOk(schema: Schema, value: Json): boolean {
  if (value === null) return schema.nullable === true;
  if (schema['x-kubernetes-int-or-string'] === true) return Number.isInteger(value) || typeof value === 'string';
  switch (schema.type) {
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    default:
      return true;
  }
}

/** Problems as field paths, like the API server's `spec.pools[1].name`; CEL rules only when the rest passed (as the API server does). */
function validate(schema: Schema, value: Json, path: string, problems: string[]): void {
  if (!typeOk(schema, value)) {
    problems.push(path);
    return;
  }
  const before = problems.length;
  validateScalar(schema, value, path, problems);
  if (isObject(value)) validateObject(schema, value, path, problems);
  if (Array.isArray(value)) validateArray(schema, value, path, problems);
  if (problems.length > before) return;
  for (const { rule, fieldPath } of schema['x-kubernetes-validations'] ?? []) {
    const check = CEL[rule];
    if (check === undefined) throw new Error(`CEL rule not emulated in this test: ${rule}`);
    if (!check(value)) problems.push(`${path}${fieldPath ?? ''}`);
  }
}

function validateScalar(schema: Schema, value: Json, path: string, problems: string[]): void {
  if (schema.enum !== undefined && !schema.enum.includes(value)) problems.push(path);
  if (typeof value === 'number' && schema.minimum !== undefined && value < schema.minimum) problems.push(path);
  if (typeof value !== 'string') return;
  if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(path);
  if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(path);
  if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) problems.push(path);
}

function validateObject(schema: Schema, value: Record<string, Json>, path: string, problems: string[]): void {
  for (const key of schema.required ?? []) if (value[key] === undefined) problems.push(`${path}.${key}`);
  for (const [key, v] of Object.entries(value)) {
    const child = schema.properties?.[key] ?? schema.additionalProperties;
    if (child !== undefined) validate(child, v, `${path}.${key}`, problems);
  }
}

function validateArray(schema: Schema, value: readonly Json[], path: string, problems: string[]): void {
  if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(path);
  if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(path);
  value.forEach((v, i) => {
    if (schema.items !== undefined) validate(schema.items, v, `${path}[${i}]`, problems);
  });
  if (schema['x-kubernetes-list-type'] === 'set') {
    value.forEach((v, i) => {
      if (value.findIndex((w) => JSON.stringify(w) === JSON.stringify(v)) !== i) problems.push(`${path}[${i}]`);
    });
  }
  if (schema['x-kubernetes-list-type'] !== 'map') return;
  const keys = schema['x-kubernetes-list-map-keys'] ?? [];
  const seen = new Set<string>();
  value.forEach((v, i) => {
    const id = JSON.stringify(keys.map((k) => (v as Record<string, Json>)[k]));
    if (seen.has(id)) problems.push(`${path}[${i}]${keys.length === 1 ? `.${keys[0] ?? ''}` : ''}`);
    seen.add(id);
  });
}

/** Structural defaulting as the API server does it: missing fields with a default get it, then recurse. */
function withDefaults(schema: Schema, value: Json): Json {
  if (isObject(value) && schema.properties !== undefined) {
    const out: Record<string, Json> = { ...value };
    for (const [key, child] of Object.entries(schema.properties)) {
      if (out[key] === undefined && child.default !== undefined) out[key] = structuredClone(child.default);
      if (out[key] !== undefined) out[key] = withDefaults(child, out[key]);
    }
    return out;
  }
  if (Array.isArray(value) && schema.items !== undefined) return value.map((v) => withDefaults(schema.items ?? {}, v));
  return value;
}

function collectRules(schema: Schema, out: string[] = []): string[] {
  for (const v of schema['x-kubernetes-validations'] ?? []) out.push(v.rule);
  for (const child of Object.values(schema.properties ?? {})) collectRules(child, out);
  if (schema.items !== undefined) collectRules(schema.items, out);
  if (schema.additionalProperties !== undefined) collectRules(schema.additionalProperties, out);
  return out;
}

describe('the DriverRollout CRD', () => {
  it('names the group, version, kind and plural the code uses, with a status subresource', () => {
    expect(crd.metadata.name).toBe(`${DRIVER_ROLLOUT_PLURAL}.${DRIVER_ROLLOUT_GROUP}`);
    expect(crd.spec.group).toBe(DRIVER_ROLLOUT_GROUP);
    expect(crd.spec.names).toMatchObject({ kind: DRIVER_ROLLOUT_KIND, plural: DRIVER_ROLLOUT_PLURAL });
    expect(version.name).toBe(DRIVER_ROLLOUT_VERSION);
    expect(version.subresources?.status).toEqual({});
  });

  it('has only CEL rules this test can evaluate', () => {
    for (const rule of collectRules(specSchema)) expect(Object.keys(CEL)).toContain(rule);
  });

  it.each(SPEC_SAMPLES.map((s) => [s.name, s] as const))('agrees with parseDriverRolloutSpec on: %s', (_name, sample) => {
    const problems: string[] = [];
    validate(specSchema, withDefaults(specSchema, sample.spec), 'spec', problems);
    const runtime = parseDriverRolloutSpec(sample.spec);
    if (sample.invalidAt === null) {
      expect(problems).toEqual([]);
      expect(runtime.ok).toBe(true);
    } else if (sample.runtimeOnly === true) {
      expect(problems).toEqual([]);
      expect(runtime.ok).toBe(false);
    } else {
      expect(problems).toContain(sample.invalidAt);
      expect(runtime.ok).toBe(false);
    }
  });

  it.each(SPEC_SAMPLES.filter((s) => s.invalidAt === null).map((s) => [s.name, s] as const))('defaults like zod: %s', (_name, sample) => {
    const runtime = parseDriverRolloutSpec(sample.spec);
    if (!runtime.ok) throw new Error('expected a valid sample');
    expect(withDefaults(specSchema, sample.spec)).toEqual(runtime.policy.spec);
  });

  it("keeps every field of the planner's status (nothing pruned) and feeds the printer columns", () => {
    const plan = planAt(aCluster([aNode('a'), aNode('b').inState('upgrade-failed').cordoned().outdated()]), aPolicy());
    const status = { ...plan.status, conditions: plan.status.conditions.map((c) => ({ ...c, lastTransitionTime: '2026-11-22T03:00:00Z', observedGeneration: 3 })) };
    const problems: string[] = [];
    validate(statusSchema, status, 'status', problems);
    expect(problems).toEqual([]);
    const unknown: string[] = [];
    const walk = (schema: Schema, value: Json, path: string): void => {
      if (isObject(value)) {
        for (const [k, v] of Object.entries(value)) {
          const child = schema.properties?.[k] ?? schema.additionalProperties;
          if (child === undefined) unknown.push(`${path}.${k}`);
          else walk(child, v, `${path}.${k}`);
        }
      }
      if (Array.isArray(value)) value.forEach((v) => { walk(schema.items ?? {}, v, `${path}[]`); });
    };
    walk(statusSchema, status, 'status');
    expect(unknown).toEqual([]);
    const columns = Object.fromEntries(version.additionalPrinterColumns.map((c) => [c.name, c.jsonPath]));
    const read = (jsonPath: string): Json => jsonPath.split('.').slice(1).reduce<Json>((v, k) => (isObject(v) ? v[k] : undefined), { status, spec: { driverName: 'gpu' }, metadata: { creationTimestamp: 'x' } });
    expect([columns.Driver, columns.Done, columns.Failed, columns.Paused, columns.Age].map((p) => read(p ?? ''))).toEqual(['gpu', '1/2', 1, false, 'x']);
  });

  it("keeps the canary's status as stored (soaking, and failed with a rollback), nothing pruned", () => {
    const canary = { [KEYS.canary]: 'gpu-driver=rev-new', [KEYS.stateStartTime]: secondsAgo(10) };
    const soaking = planAt(aCluster([aNode('a').inState('upgrade-done').annotated(canary), aNode('b').inState('upgrade-done').outdated()]), aPolicy({}, { canary: { nodes: 1, then: 'Continue', soakSeconds: 60 } }));
    const failing = planAt(
      { ...aCluster([aNode('a').inState('upgrade-failed').annotated(canary).cordoned().driverNotReady(), aNode('b').inState('upgrade-done').outdated()]), daemonSets: [{ namespace: 'gpu-operator', name: 'gpu-driver', updatedRevisionHash: 'rev-new', previousRevisionHash: 'rev-old' }] },
      aPolicy({}, { canary: { nodes: 1 }, onCanaryFailure: 'Rollback' }),
    );
    expect(soaking.status.canary?.phase).toBe('Soaking');
    expect(failing.status.canary?.phase).toBe('CanaryFailed');
    for (const plan of [soaking, failing]) {
      const status = toStoredStatus(undefined, plan.status, 3, '2026-11-22T03:00:00Z');
      const problems: string[] = [];
      validate(statusSchema, JSON.parse(JSON.stringify(status)) as Json, 'status', problems);
      expect(problems).toEqual([]);
      const canarySchema = statusSchema.properties?.canary?.properties ?? {};
      expect(Object.keys(status.canary ?? {}).filter((k) => canarySchema[k] === undefined)).toEqual([]);
    }
  });
});
