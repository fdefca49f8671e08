import { KubernetesObjectApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { apiErrorMessage, isNotFound } from '../../../shared/kube/api-error.ts';
import { waitUntil } from '../../bed/wait-until.ts';

const MANIFESTS = resolve(import.meta.dirname, '../../../manifests');
const CLUSTER_SCOPED = new Set(['ClusterRole', 'ClusterRoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);

export interface DriverSecurity {
  readonly serviceAccount: string;
  readonly policyName: string;
  delete(): Promise<void>;
}

type Doc = KubernetesObject & {
  subjects?: { namespace?: string; name: string; kind: string }[];
  roleRef?: { kind: string; name: string };
  spec?: { policyName?: string };
};

/**
 * Applies manifests/driver-rbac.yaml and manifests/safe-load-policy.yaml as shipped, moved to
 * `namespace` (those in `default` stay there), with `suffix` appended to the names of cluster-scoped
 * and `default` objects so that tests on
 * the shared cluster never collide. Nothing else in them is changed.
 */
export async function applyDriverSecurity(kc: KubeConfig, namespace: string, suffix: string): Promise<DriverSecurity> {
  const docs: Doc[] = [];
  for (const file of ['driver-rbac.yaml', 'safe-load-policy.yaml']) {
    for (const doc of parseAllDocuments(await readFile(resolve(MANIFESTS, file), 'utf8'))) docs.push(doc.toJS() as Doc);
  }
  const objects = docs.map((d) => instantiate(d, namespace, suffix));
  const client = KubernetesObjectApi.makeApiClient(kc);
  for (const o of objects) await client.create(o);
  const serviceAccount = objects.find((o) => o.kind === 'ServiceAccount')?.metadata?.name ?? '';
  const policyName = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy')?.metadata?.name ?? '';
  return {
    serviceAccount,
    policyName,
    delete: async () => {
      for (const o of [...objects].reverse()) {
        try {
          await client.delete(o);
        } catch (error) {
          if (!isNotFound(error)) throw error;
        }
      }
    },
  };
}

function instantiate(doc: Doc, namespace: string, suffix: string): Doc {
  const out = structuredClone(doc);
  out.metadata ??= {};
  // Objects the manifest puts in `default` (node Events' RBAC) must stay there: renamed instead.
  const inDefault = out.metadata.namespace === 'default';
  if (CLUSTER_SCOPED.has(out.kind ?? '') || inDefault) out.metadata.name = `${out.metadata.name ?? ''}-${suffix}`;
  else out.metadata.namespace = namespace;
  if (inDefault && out.roleRef?.kind === 'Role') out.roleRef.name = `${out.roleRef.name}-${suffix}`;
  for (const s of out.subjects ?? []) if (s.kind === 'ServiceAccount') s.namespace = namespace;
  if (out.roleRef?.kind === 'ClusterRole') out.roleRef.name = `${out.roleRef.name}-${suffix}`;
  if (out.kind === 'ValidatingAdmissionPolicyBinding' && out.spec?.policyName !== undefined) out.spec.policyName = `${out.spec.policyName}-${suffix}`;
  return out;
}

/**
 * A new admission policy takes a moment to reach the admission plugin: resolves once `attempt`
 * (a dry-run write the policy must refuse) is refused with the policy's message.
 */
export async function waitForDriverPolicy(what: string, attempt: () => Promise<unknown>): Promise<void> {
  await waitUntil(what, async () => {
    try {
      await attempt();
      return undefined;
    } catch (error) {
      return apiErrorMessage(error).includes('driver-rollout:') ? true : undefined;
    }
  }, { timeoutMs: 60_000, intervalMs: 250 });
}
