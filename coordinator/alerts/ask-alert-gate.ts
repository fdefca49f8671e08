/**
 * The alert gate's port and its production adapter: one reading of a rollout's gate. The adapter
 * reads the bearer token and the CA bundle from the Secret or ConfigMap keys the spec names (in
 * the rollout's namespace, at every poll, so a rotated token is used at the next one), then asks
 * Prometheus (read-prometheus-alerts.ts). Never rejects: a Secret that cannot be read is the
 * reading's problem, and holds starts like an unreachable Prometheus.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { apiErrorMessage, isForbidden, isNotFound } from '../../shared/kube/api-error.ts';
import type { AlertGateReading } from '../plan/snapshot.ts';
import type { AlertGatePolicy, KeyRef } from '../policy/driver-rollout-spec.ts';
import { withTimeout } from '../with-timeout.ts';
import { readPrometheusAlerts } from './read-prometheus-alerts.ts';

/** A rollout's gate, where its Secret and ConfigMap references resolve. */
export interface AlertGateSource {
  readonly namespace: string;
  readonly gate: AlertGatePolicy;
}

/** One reading of the gate; resolves (never rejects) by the gate's timeout or when `signal` aborts. */
export type AskAlertGate = (source: AlertGateSource, signal: AbortSignal) => Promise<AlertGateReading>;

/** A Secret or ConfigMap key could not be read: the text says which and why, never the value. */
class KeyReadProblem extends Error {}

export function createAskAlertGate(kc: KubeConfig): AskAlertGate {
  const core = kc.makeApiClient(CoreV1Api);
  const readKey = async (kind: 'secret' | 'configMap', namespace: string, ref: KeyRef, timeoutMs: number): Promise<string> => {
    const what = `${kind === 'secret' ? 'Secret' : 'ConfigMap'} ${namespace}/${ref.name}`;
    let data: Record<string, string> | undefined;
    try {
      if (kind === 'secret') {
        const secret = await withTimeout(core.readNamespacedSecret({ name: ref.name, namespace }), timeoutMs, `reading ${what}`);
        data = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
      } else {
        data = (await withTimeout(core.readNamespacedConfigMap({ name: ref.name, namespace }), timeoutMs, `reading ${what}`)).data;
      }
    } catch (error) {
      if (isNotFound(error)) throw new KeyReadProblem(`${what} not found`);
      if (isForbidden(error)) throw new KeyReadProblem(`the coordinator may not read ${what} (grant it get on it)`);
      throw new KeyReadProblem(`cannot read ${what}: ${apiErrorMessage(error)}`);
    }
    const value = data?.[ref.key];
    if (value === undefined || value.trim() === '') throw new KeyReadProblem(`${what} has no key ${ref.key}`);
    return value;
  };
  return async ({ namespace, gate }, signal) => {
    const timeoutMs = gate.timeoutSeconds * 1000;
    let token: string | null;
    let ca: string | null;
    try {
      token = gate.bearerToken === null ? null : (await readKey('secret', namespace, gate.bearerToken, timeoutMs)).trim();
      ca = gate.ca === null ? null : await readKey(gate.ca.kind, namespace, gate.ca.ref, timeoutMs);
    } catch (error) {
      if (error instanceof KeyReadProblem) return { kind: 'unanswered', problem: error.message };
      throw error;
    }
    return readPrometheusAlerts({ url: gate.url, token, ca, insecureSkipVerify: gate.insecureSkipVerify, timeoutMs }, signal);
  };
}
