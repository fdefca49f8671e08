import { AppsV1Api, AuthenticationV1Api, CoreV1Api, CustomObjectsApi, PolicyV1Api, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { DRIVER_ROLLOUT_GROUP as GROUP, DRIVER_ROLLOUT_PLURAL as PLURAL, DRIVER_ROLLOUT_VERSION as VERSION } from '../coordinator/policy/driver-rollout-spec.ts';
import { compileLabelSelector, matchesSelector } from '../coordinator/policy/label-selector.ts';
import type { ClusterSnapshot, RolloutObject } from './rollout-view.ts';

/** Which DriverRollouts to read: one namespace, or every namespace when undefined. */
export type Scope = { readonly namespace: string } | { readonly namespace: undefined };

/** The reading shell of the plugin: lists what the pure views need, nothing else. */
export class ClusterReader {
  readonly #custom: CustomObjectsApi;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #policy: PolicyV1Api;
  readonly #kc: KubeConfig;

  constructor(kc: KubeConfig) {
    this.#kc = kc;
    this.#custom = kc.makeApiClient(CustomObjectsApi);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#apps = kc.makeApiClient(AppsV1Api);
    this.#policy = kc.makeApiClient(PolicyV1Api);
  }

  async listRollouts(scope: Scope): Promise<RolloutObject[]> {
    const list = (scope.namespace === undefined
      ? await this.#custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })
      : await this.#custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: scope.namespace, plural: PLURAL })) as { items?: RolloutObject[] };
    return list.items ?? [];
  }

  /** The rollouts, every node, and the pods and selected DaemonSets of the rollouts' namespaces. */
  async readSnapshot(rollouts: readonly RolloutObject[]): Promise<ClusterSnapshot> {
    const namespaces = [...new Set(rollouts.map((r) => r.metadata?.namespace ?? ''))];
    const [nodes, perNamespace] = await Promise.all([
      this.#core.listNode().then((l) => l.items),
      Promise.all(namespaces.map(async (namespace) => {
        const [pods, daemonSets] = await Promise.all([
          this.#core.listNamespacedPod({ namespace }).then((l) => l.items),
          this.#apps.listNamespacedDaemonSet({ namespace }).then((l) => l.items),
        ]);
        return { namespace, pods, daemonSets };
      })),
    ]);
    const daemonSetUids = new Map<string, Set<string>>();
    for (const r of rollouts) {
      const compiled = compileLabelSelector(r.spec?.selector ?? {});
      const inNamespace = perNamespace.find((p) => p.namespace === r.metadata?.namespace);
      const uids = new Set<string>();
      // An empty selector is refused by the CRD; never let it select every DaemonSet here either.
      if (compiled.ok && compiled.selector.requirements.length > 0) {
        for (const ds of inNamespace?.daemonSets ?? []) {
          if (matchesSelector(compiled.selector, ds.metadata?.labels ?? {}) && ds.metadata?.uid !== undefined) uids.add(ds.metadata.uid);
        }
      }
      daemonSetUids.set(r.metadata?.uid ?? '', uids);
    }
    return { rollouts, nodes, pods: perNamespace.flatMap((p) => p.pods), daemonSetUids };
  }

  /**
   * Who the API server takes this user for (a SelfSubjectReview, as `kubectl auth whoami`); where
   * the server refuses one, the kubeconfig's user name, marked as such.
   */
  async whoAmI(): Promise<string> {
    try {
      const review = await this.#kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } });
      const username = review.status?.userInfo?.username;
      if (username !== undefined && username !== '') return username;
    } catch {
      // Older servers, or RBAC without selfsubjectreviews: fall back to the kubeconfig.
    }
    return `${this.#kc.getCurrentUser()?.name ?? 'unknown'} (kubeconfig user)`;
  }

  async readNode(name: string): Promise<V1Node> {
    return await this.#core.readNode({ name });
  }

  async podsOnNode(node: string): Promise<V1Pod[]> {
    return (await this.#core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })).items;
  }

  async pdbsIn(namespaces: readonly string[]): Promise<Awaited<ReturnType<PolicyV1Api['listNamespacedPodDisruptionBudget']>>['items']> {
    const lists = await Promise.all(namespaces.map(async (namespace) => (await this.#policy.listNamespacedPodDisruptionBudget({ namespace })).items));
    return lists.flat();
  }

  async nodeEvents(node: string): Promise<Awaited<ReturnType<CoreV1Api['listEventForAllNamespaces']>>['items']> {
    return (await this.#core.listEventForAllNamespaces({ fieldSelector: `involvedObject.kind=Node,involvedObject.name=${node}` })).items;
  }
}
