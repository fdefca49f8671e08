import type { V1Container, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { TEST_NODE_LABEL, type RolloutWorld } from './harness.ts';

/** The GPU Operator's operand label of the device plugin. */
export const DEVICE_PLUGIN_LABEL = 'nvidia.com/gpu.deploy.device-plugin';

/** A device-plugin-like DaemonSet (`app=device-plugin`) on the world's nodes labelled `DEVICE_PLUGIN_LABEL=true`. */
export async function createDevicePlugin(world: RolloutWorld, container: V1Container, terminationGracePeriodSeconds = 0): Promise<void> {
  await createNodeDaemonSet(world, 'device-plugin', { nodeLabels: { [DEVICE_PLUGIN_LABEL]: 'true' }, container, pod: { terminationGracePeriodSeconds } });
}

export interface NodeDaemonSetShape {
  /** Node labels its pods require besides the world's own test label. */
  readonly nodeLabels?: Readonly<Record<string, string>>;
  /** Labels of its pods besides `app=<name>`. */
  readonly podLabels?: Readonly<Record<string, string>>;
  /** Its one container; `{ name: 'c', image: '<name>:v1' }` when not given. */
  readonly container?: V1Container;
  /** Pod spec fields set as given, over the defaults (`terminationGracePeriodSeconds`, `readinessGates`, ...); none by default. */
  readonly pod?: Partial<V1PodSpec>;
}

/**
 * A DaemonSet `name` (pods labelled `app=<name>` and `podLabels`) on the world's nodes that also
 * carry `nodeLabels`, tolerating every taint.
 */
export async function createNodeDaemonSet(world: RolloutWorld, name: string, shape: NodeDaemonSetShape = {}): Promise<void> {
  await world.apps.createNamespacedDaemonSet({
    namespace: world.ns.name,
    body: {
      metadata: { name },
      spec: {
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name, ...shape.podLabels } },
          spec: {
            nodeSelector: { [TEST_NODE_LABEL]: world.id, ...shape.nodeLabels },
            tolerations: [{ operator: 'Exists' }],
            containers: [shape.container ?? { name: 'c', image: `${name}:v1` }],
            ...shape.pod,
          },
        },
      },
    },
  });
}

export async function devicePluginPods(world: RolloutWorld): Promise<V1Pod[]> {
  return (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=device-plugin' })).items;
}
