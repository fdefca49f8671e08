import type { CoreV1Api } from '@kubernetes/client-node';
import type { DriverKeys } from '../../shared/keys.ts';
import { MERGE_PATCH } from '../../shared/kube/patch-options.ts';
import type { DriverState } from './driver-state.ts';

/** Label changes for a JSON merge patch: a string sets the label, null removes it. */
export type LabelPatch = Readonly<Record<string, string | null>>;

/**
 * Pure: the node labels that say what this driver does on the node, so that
 * `kubectl get nodes -L driver-rollout.io/<driver>.present,driver-rollout.io/<driver>-driver.version` answers
 * "which nodes run which driver". Keys absent from the result are left as they are:
 * - before detection nothing is known, so nothing is written;
 * - a node without devices loses every label (selectors like `-l driver-rollout.io/gpu.present` skip it); the keys are
 *   the agent's own (OWN_KEY_DOMAIN), so this never removes labels NFD, GFD or the GPU Operator set;
 * - the version label names what was verified loaded, and stays while a later reload is attempted
 *   or after the agent stops (the driver stays loaded) — unless the agent unloaded it on stop.
 */
export function nodeLabelsFor(keys: DriverKeys, state: DriverState): LabelPatch {
  if (state.phase === 'NoDevice') {
    return { [keys.devicePresent]: null, [keys.deviceCount]: null, [keys.driverVersion]: null, [keys.driverReady]: null };
  }
  if (state.phase === 'Unloaded') return { [keys.driverVersion]: null, [keys.driverReady]: 'false' };
  if (state.deviceCount === undefined) return {};
  const labels: Record<string, string | null> = {
    [keys.devicePresent]: 'true',
    [keys.deviceCount]: String(state.deviceCount),
    [keys.driverReady]: state.phase === 'Loaded' ? 'true' : 'false',
  };
  if (state.phase === 'Loaded' && state.driverVersion !== undefined) {
    labels[keys.driverVersion] = toLabelValue(state.driverVersion);
  }
  return labels;
}

/**
 * Label values: at most 63 characters of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
 * Driver versions (`570.86.15`, `24.10-1.1.4.0`) already are; anything else is made to fit.
 */
export function toLabelValue(text: string): string {
  return text
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+/, '')
    .replace(/[^A-Za-z0-9]+$/, '');
}

/** Label and annotation changes on the node, sent as one JSON merge patch. */
export interface NodeMetadataPatch {
  readonly labels: LabelPatch;
  readonly annotations: LabelPatch;
}

/** Writes label and annotation patches on the node in one request; identical consecutive patches are not sent again. */
export function createNodeMetadataWriter(core: CoreV1Api, nodeName: string) {
  let lastSent = '';
  return async ({ labels, annotations }: NodeMetadataPatch): Promise<void> => {
    const metadata = {
      ...(Object.keys(labels).length === 0 ? {} : { labels }),
      ...(Object.keys(annotations).length === 0 ? {} : { annotations }),
    };
    const key = JSON.stringify(metadata);
    if (key === '{}' || key === lastSent) return;
    await core.patchNode({ name: nodeName, body: { metadata } }, MERGE_PATCH);
    lastSent = key;
  };
}

/** Writes label patches only (the next-kernel preflight's labels); identical consecutive patches are not sent again. */
export function createNodeLabelWriter(core: CoreV1Api, nodeName: string) {
  const write = createNodeMetadataWriter(core, nodeName);
  return (labels: LabelPatch): Promise<void> => write({ labels, annotations: {} });
}
