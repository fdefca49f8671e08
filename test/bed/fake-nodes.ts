import { CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { KWOK_NODE_ANNOTATION } from '../../shared/keys.ts';
import { isNotFound } from '../../shared/kube/api-error.ts';
import { waitUntil } from './wait-until.ts';

export interface FakeNodeSpec {
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly unschedulable?: boolean;
}

/**
 * Creates nodes that KWOK runs (profile `full`): they turn Ready, keep a node lease, and run
 * the pods scheduled onto them. Resolves once every node reports Ready.
 */
export async function createFakeNodes(kc: KubeConfig, nodes: readonly FakeNodeSpec[], timeoutMs = 60_000): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await Promise.all(nodes.map(async (n) => {
    const body: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: n.name,
        labels: { 'kubernetes.io/hostname': n.name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', type: 'kwok', ...n.labels },
        annotations: { [KWOK_NODE_ANNOTATION]: 'fake', 'node.alpha.kubernetes.io/ttl': '0', ...n.annotations },
      },
      spec: n.unschedulable === true ? { unschedulable: true } : {},
    };
    await core.createNode({ body });
  }));
  await waitUntil(`fake nodes ${nodes.map((n) => n.name).join(', ')} to become Ready`, async () => {
    const ready = await Promise.all(nodes.map(async (n) => isReady(await core.readNode({ name: n.name }))));
    return ready.every(Boolean) ? true : undefined;
  }, { timeoutMs, intervalMs: 200 });
}

export async function deleteFakeNodes(kc: KubeConfig, names: readonly string[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await Promise.all(names.map(async (name) => {
    try {
      await core.deleteNode({ name });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }));
}

function isReady(node: V1Node): boolean {
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}
