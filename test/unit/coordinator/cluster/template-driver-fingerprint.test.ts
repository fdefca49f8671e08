import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { V1Container, V1DaemonSet, V1EnvVar, V1PodTemplateSpec } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { driverIdentityOf } from '../../../../agent/config/driver-identity-of.ts';
import { envName } from '../../../../agent/config/flag-fields.ts';
import { agentEnvironmentVariables, agentSettings, parseAgentConfig } from '../../../../agent/config/parse-agent-config.ts';
import { revisionTemplate, templateDriverFingerprint, templateModuleSigner } from '../../../../coordinator/cluster/template-driver-fingerprint.ts';
import { MODULE_SIGNER_ANNOTATION } from '../../../../shared/keys.ts';
import { driverFingerprint, IDENTITY_SETTINGS } from '../../../../shared/driver-identity.ts';

const MANIFEST = resolve(import.meta.dirname, '../../../../manifests/driver-daemonset.yaml');
const shipped = (parse(await readFile(MANIFEST, 'utf8')) as V1DaemonSet).spec?.template as V1PodTemplateSpec;

/** A copy of the shipped template whose agent container `change` edits in place. */
function withAgent(change: (agent: V1Container) => void): V1PodTemplateSpec {
  const copy = structuredClone(shipped);
  const agent = copy.spec?.containers.find((c) => c.name === 'agent');
  if (agent === undefined) throw new Error('the manifest has no agent container');
  change(agent);
  return copy;
}

function setEnv(agent: V1Container, values: Record<string, string>): void {
  agent.env = [...(agent.env ?? []).filter((e) => !(e.name in values)), ...Object.entries(values).map(([name, value]) => ({ name, value }))];
}

function dropEnv(agent: V1Container, name: string): void {
  agent.env = (agent.env ?? []).filter((e) => e.name !== name);
}

/** What the agent itself would publish after loading with this template (as the kubelet resolves the downward API). */
function agentFingerprint(template: V1PodTemplateSpec): string {
  const agent = template.spec?.containers.find((c) => c.name === 'agent');
  const fields: Record<string, string> = { 'spec.nodeName': 'n1', 'metadata.name': 'p1', 'metadata.namespace': 'driver-rollout' };
  const env = Object.fromEntries((agent?.env ?? []).map((e: V1EnvVar) => [e.name, e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '']));
  return driverFingerprint(driverIdentityOf(parseAgentConfig([], env)));
}

describe('templateDriverFingerprint', () => {
  it.each<{ what: string; template: V1PodTemplateSpec }>([
    { what: 'the shipped DaemonSet', template: shipped },
    { what: 'module parameters and an optional module', template: withAgent((a) => { setEnv(a, { MODULE_PARAMETERS: 'nvidia.NVreg_EnableGpuFirmware=0 nvidia_drm.modeset=1', LOAD_OPTIONAL: 'nvidia-drm' }); }) },
    { what: 'no load plan (the default)', template: withAgent((a) => { dropEnv(a, 'LOAD_PLAN'); }) },
  ])('is what the agent publishes once it has loaded $what', ({ template }) => {
    const fingerprint = templateDriverFingerprint(template);
    expect(fingerprint).not.toBeNull();
    expect(fingerprint).toBe(agentFingerprint(template));
  });

  it('does not change with the image or settings outside the identity', () => {
    const restyled = withAgent((a) => { a.image = 'driver-rollout/agent:0.2.0'; setEnv(a, { LOG_LEVEL: 'debug', HTTP_PORT: '8081' }); });
    expect(templateDriverFingerprint(restyled)).toBe(templateDriverFingerprint(shipped));
  });

  it('changes with the driver version', () => {
    expect(templateDriverFingerprint(withAgent((a) => { setEnv(a, { DRIVER_VERSION: '580.65.06' }); }))).not.toBe(templateDriverFingerprint(shipped));
  });

  it.each<{ what: string; template: V1PodTemplateSpec | undefined }>([
    { what: 'no template', template: undefined },
    { what: 'no container sets DRIVER_VERSION', template: withAgent((a) => { dropEnv(a, 'DRIVER_VERSION'); }) },
    { what: 'the version from a ConfigMap', template: withAgent((a) => { dropEnv(a, 'DRIVER_VERSION'); a.env?.push({ name: 'DRIVER_VERSION', valueFrom: { configMapKeyRef: { name: 'cm', key: 'v' } } }); }) },
    { what: 'module parameters from a ConfigMap', template: withAgent((a) => { dropEnv(a, 'MODULE_PARAMETERS'); a.env?.push({ name: 'MODULE_PARAMETERS', valueFrom: { configMapKeyRef: { name: 'cm', key: 'p' } } }); }) },
    { what: 'envFrom', template: withAgent((a) => { a.envFrom = [{ configMapRef: { name: 'cm' } }]; }) },
    { what: 'a version flag', template: withAgent((a) => { a.args = ['--driver-version=1.2.3']; }) },
    { what: 'a parameters flag', template: withAgent((a) => { a.args = ['--module-parameters', 'nvidia.A=1']; }) },
    { what: 'parameters the agent would refuse', template: withAgent((a) => { setEnv(a, { MODULE_PARAMETERS: 'nvidia' }); }) },
    {
      what: 'two containers that set DRIVER_VERSION',
      template: (() => {
        const copy = structuredClone(shipped);
        copy.spec?.containers.push({ name: 'second', env: [{ name: 'DRIVER_VERSION', value: '1' }] });
        return copy;
      })(),
    },
  ])('is unknown (full upgrade path) with $what', ({ template }) => {
    expect(templateDriverFingerprint(template)).toBeNull();
  });

  it("names the agent's own flags and variables", () => {
    for (const setting of Object.values(IDENTITY_SETTINGS)) {
      expect(envName(setting.flag)).toBe(setting.env);
      expect(agentEnvironmentVariables()).toContain(setting.env);
      expect(agentSettings()).toContain(`--${setting.flag} / ${setting.env}`);
    }
  });
});

describe('revisionTemplate', () => {
  it("reads the template the DaemonSet controller stores in a ControllerRevision's data", () => {
    const template = revisionTemplate({ revision: 2, data: { spec: { template: { ...structuredClone(shipped) as object, $patch: 'replace' } } } });
    expect(templateDriverFingerprint(template)).toBe(templateDriverFingerprint(shipped));
  });

  it.each([undefined, { revision: 1 }, { revision: 1, data: 'x' }, { revision: 1, data: { spec: {} } }])('is undefined for %j', (revision) => {
    expect(revisionTemplate(revision)).toBeUndefined();
  });
});

describe('templateModuleSigner', () => {
  const annotated = (annotations: Record<string, string> | undefined): V1PodTemplateSpec => {
    const copy = structuredClone(shipped);
    copy.metadata = annotations === undefined ? {} : { annotations };
    return copy;
  };

  it.each([
    { what: "a signer's name", annotations: { [MODULE_SIGNER_ANNOTATION]: 'Example Corp driver signing' }, signer: 'Example Corp driver signing' },
    { what: 'unsigned', annotations: { [MODULE_SIGNER_ANNOTATION]: 'unsigned' }, signer: 'unsigned' },
    { what: 'surrounding blanks dropped', annotations: { [MODULE_SIGNER_ANNOTATION]: ' Example Corp driver signing\n' }, signer: 'Example Corp driver signing' },
    { what: 'a blank value: not said', annotations: { [MODULE_SIGNER_ANNOTATION]: ' ' }, signer: null },
    { what: 'no annotation: not said', annotations: undefined, signer: null },
  ])('reads the declaration of the template: $what', ({ annotations, signer }) => {
    expect(templateModuleSigner(annotated(annotations))).toBe(signer);
  });

  it('is not said without a template', () => {
    expect(templateModuleSigner(undefined)).toBeNull();
  });
});
