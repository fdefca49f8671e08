import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { isConflict, isNotFound } from '../../shared/kube/api-error.ts';

export interface TestNamespace {
  readonly name: string;
  delete(): Promise<void>;
}

/**
 * A fresh namespace for one test, with its `default` service account created at once (on the
 * `api` profile no controller creates it; on `full` this only saves waiting for one).
 */
export async function createTestNamespace(kc: KubeConfig, prefix: string): Promise<TestNamespace> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = `${prefix}-${randomBytes(3).toString('hex')}`.toLowerCase().slice(0, 63);
  await core.createNamespace({ body: { metadata: { name, labels: { 'driver-rollout.test/namespace': 'true' } } } });
  try {
    await core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
  } catch (error) {
    if (!isConflict(error)) throw error;
  }
  return {
    name,
    delete: async () => {
      try {
        await core.deleteNamespace({ name });
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    },
  };
}
