import type { V1ControllerRevision, V1PodTemplateSpec } from '@kubernetes/client-node';
import { driverFingerprint, driverIdentityFromSettings, IDENTITY_SETTINGS } from '../../shared/driver-identity.ts';
import { MODULE_SIGNER_ANNOTATION } from '../../shared/keys.ts';

/**
 * The driver a DaemonSet revision's pod template would load (shared/driver-identity.ts), read
 * from the agent container's environment: the one container that sets DRIVER_VERSION. null when
 * it cannot be known from the template alone, so the node takes the full upgrade path:
 * - no container, or more than one, sets DRIVER_VERSION;
 * - a setting of the identity comes from `valueFrom` (ConfigMap, Secret, field) or the container
 *   has `envFrom` (either could set it out of sight);
 * - a setting of the identity is given as a flag in `command`/`args` (flags win over variables in
 *   the agent, and are not parsed here);
 * - the settings would not parse (the agent would refuse them).
 * Pure.
 */
export function templateDriverFingerprint(template: V1PodTemplateSpec | undefined): string | null {
  const agents = (template?.spec?.containers ?? []).filter((c) => (c.env ?? []).some((e) => e.name === IDENTITY_SETTINGS.version.env));
  const agent = agents.length === 1 ? agents[0] : undefined;
  if (agent === undefined || (agent.envFrom ?? []).length > 0) return null;
  const words = [...(agent.command ?? []), ...(agent.args ?? [])];
  const settings = Object.values(IDENTITY_SETTINGS);
  if (words.some((w) => settings.some((s) => w === `--${s.flag}` || w.startsWith(`--${s.flag}=`)))) return null;
  const env = agent.env ?? [];
  if (env.some((e) => e.valueFrom !== undefined && settings.some((s) => s.env === e.name))) return null;
  // As the kubelet resolves a name given twice: the last one wins.
  const values = new Map(env.map((e) => [e.name, e.value ?? '']));
  const identity = driverIdentityFromSettings((setting) => values.get(IDENTITY_SETTINGS[setting].env));
  return identity === null ? null : driverFingerprint(identity);
}

/**
 * Who signed the modules a revision's pod template loads, as its annotation
 * MODULE_SIGNER_ANNOTATION declares it (a signer's name, or `unsigned`); null when the template
 * does not say (absent or blank). Pure.
 */
export function templateModuleSigner(template: V1PodTemplateSpec | undefined): string | null {
  const declared = template?.metadata?.annotations?.[MODULE_SIGNER_ANNOTATION]?.trim();
  return declared === undefined || declared === '' ? null : declared;
}

/**
 * The pod template a DaemonSet's ControllerRevision holds: the DaemonSet controller stores
 * `{"spec":{"template":{...,"$patch":"replace"}}}` as the revision's data.
 */
export function revisionTemplate(revision: V1ControllerRevision | undefined): V1PodTemplateSpec | undefined {
  const data: unknown = revision?.data;
  if (typeof data !== 'object' || data === null) return undefined;
  const template: unknown = (data as { spec?: { template?: unknown } }).spec?.template;
  return typeof template === 'object' && template !== null ? template : undefined;
}
