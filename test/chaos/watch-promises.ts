import { CoreV1Api, PolicyV1Api, Watch, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import {
  adminCordoned,
  blockedByLimit,
  cordonLostViolation,
  haltedByBudget,
  isJoining,
  limitViolations,
  neverDisruptedRemoval,
  OPERAND_PAUSED,
  operandLabelsOf,
  protectedPodRemoval,
  settledViolations,
  uncordonViolations,
  type CordonWatch,
  type ObservedBudget,
  type ObservedNode,
  type ObservedPod,
  type ObservedRollout,
} from '../observer/rollout-promises.ts';

export interface PromiseWatchOptions {
  readonly kc: KubeConfig;
  /** Label selector of the rollout's nodes. */
  readonly nodeSelector: string;
  /** Namespaces whose pods are watched for removals the policy does not allow. */
  readonly podNamespaces: readonly string[];
  readonly rollout: ObservedRollout;
  readonly driverDaemonSets: readonly string[];
}

export interface PromiseWatch {
  /** Every broken promise seen so far, with the change that broke it. */
  readonly violations: readonly string[];
  /** How many changes were checked. */
  checks(): number;
  /** How many times a node's upgrade state changed since the watch began (the rollout's progress). */
  transitions(): number;
  /** Each watched node's upgrade state, as last seen. */
  states(): ReadonlyMap<string, string>;
  /**
   * Resolves true once `check` holds (tried now and on every node change), false after
   * `timeoutMs` or once the watch stops: faults keyed to the rollout's progress, not to a clock.
   */
  until(check: () => boolean, timeoutMs: number): Promise<boolean>;
  /** Of `nodes`, those the rollout cannot start by its own limits or its spent failure budget (blockedByLimit, haltedByBudget): a legitimate end. */
  blocked(nodes: readonly V1Node[]): Set<string>;
  /** Nodes the test deleted on purpose (their pods go too, by the garbage collector). */
  forgetNode(name: string): void;
  /**
   * The end of the rollout: every node done or failed with a reason, none left cordoned, and no
   * operand pod removed without its node label ever showing the pause.
   */
  checkSettled(): Promise<string[]>;
  stop(): void;
}

export function observeNode(node: V1Node): ObservedNode {
  return {
    name: node.metadata?.name ?? '',
    labels: node.metadata?.labels ?? {},
    annotations: node.metadata?.annotations ?? {},
    unschedulable: node.spec?.unschedulable === true,
    ready: node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
  };
}

export function observePod(pod: V1Pod): ObservedPod {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    labels: pod.metadata?.labels ?? {},
    annotations: pod.metadata?.annotations ?? {},
    owner: owner === undefined ? null : { kind: owner.kind, name: owner.name },
    nodeName: pod.spec?.nodeName ?? '',
    resourceNames: resourceNamesOf(pod),
    nodeSelectorKeys: nodeSelectorKeysOf(pod),
  };
}

function resourceNamesOf(pod: V1Pod): string[] {
  const containers = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  return [...new Set(containers.flatMap((c) => [...Object.keys(c.resources?.requests ?? {}), ...Object.keys(c.resources?.limits ?? {})]))];
}

function nodeSelectorKeysOf(pod: V1Pod): string[] {
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  return [...new Set([...Object.keys(pod.spec?.nodeSelector ?? {}), ...terms.flatMap((t) => (t.matchExpressions ?? []).map((e) => e.key))])];
}

/**
 * Watches the rollout's nodes and the workloads' pods and checks the observer's promises on
 * every change (test/observer/rollout-promises.ts): the limits across each node change, admin
 * cordons never lifted, a node uncordoned from outside mid-upgrade not moved on uncordoned,
 * protected pods never removed. Admin cordons are taken from the nodes as
 * the watch first lists them (the test cordons before the rollout starts). An operand pod removed
 * before the node watch shows its label paused (two watches, no order between them) is held
 * until a node change shows the pause, and judged a violation at checkSettled if none did.
 */
export async function watchPromises(options: PromiseWatchOptions): Promise<PromiseWatch> {
  const core = options.kc.makeApiClient(CoreV1Api);
  const listed = await core.listNode({ labelSelector: options.nodeSelector });
  const nodes = new Map<string, ObservedNode>(listed.items.map((n) => [n.metadata?.name ?? '', observeNode(n)]));
  const cordonedByAdmin = adminCordoned([...nodes.values()], options.rollout);
  // The workloads' PodDisruptionBudgets, as they are when the watch starts (the scenarios create them before).
  const policy = options.kc.makeApiClient(PolicyV1Api);
  const budgets: ObservedBudget[] = (await Promise.all(options.podNamespaces.map((namespace) => policy.listNamespacedPodDisruptionBudget({ namespace }))))
    .flatMap((list) => list.items)
    .map((b) => ({
      namespace: b.metadata?.namespace ?? '',
      name: b.metadata?.name ?? '',
      selector: { matchLabels: b.spec?.selector?.matchLabels ?? {}, matchExpressions: (b.spec?.selector?.matchExpressions ?? []).map((e) => ({ key: e.key, operator: e.operator, values: e.values ?? [] })) },
      maxUnavailable: b.spec?.maxUnavailable ?? null,
    }));
  const violations: string[] = [];
  const forgotten = new Set<string>();
  /** Operand pods removed before their node showed the pause: id → node, operand labels, the verdict. */
  const unpaused = new Map<string, { node: string; labels: readonly string[]; why: string }>();
  const pausedOn = new Map<string, Set<string>>();
  let checks = 0;
  let transitions = 0;
  const waiters = new Set<() => void>();
  const requests: AbortController[] = [];
  let stopped = false;

  const cordons = new Map<string, CordonWatch>();
  const judgeCordon = (prior: ObservedNode | undefined, now: ObservedNode | undefined): void => {
    if (now === undefined) return;
    const judged = cordonLostViolation(cordons.get(now.name), prior, now, options.rollout);
    cordons.set(now.name, judged.watch);
    if (judged.violation !== null) violations.push(`${new Date().toISOString()} ${judged.violation}`);
  };
  const onNode = (type: string, node: V1Node): void => {
    const before = [...nodes.values()];
    const name = node.metadata?.name ?? '';
    const prior = nodes.get(name);
    const priorState = nodes.get(name)?.labels[options.rollout.stateKey];
    if (type !== 'DELETED' && priorState !== node.metadata?.labels?.[options.rollout.stateKey]) transitions += 1;
    if (type === 'DELETED') nodes.delete(name);
    else {
      const observed = observeNode(node);
      const joining = isJoining(nodes.get(name), observed.ready, type === 'ADDED');
      nodes.set(name, joining ? { ...observed, joining } : observed);
    }
    const after = [...nodes.values()];
    const labels = node.metadata?.labels ?? {};
    const paused = pausedOn.get(name) ?? new Set<string>();
    for (const [k, v] of Object.entries(labels)) if (v === OPERAND_PAUSED) paused.add(k);
    pausedOn.set(name, paused);
    for (const [id, held] of unpaused) if (held.node === name && held.labels.some((k) => paused.has(k))) unpaused.delete(id);
    checks += 1;
    for (const v of [...limitViolations(before, after, options.rollout), ...uncordonViolations(after, cordonedByAdmin)]) violations.push(`${new Date().toISOString()} ${v}`);
    judgeCordon(prior, nodes.get(name));
    for (const wake of [...waiters]) wake();
  };
  const judged = new Set<string>();
  const onPod = (type: string, pod: V1Pod): void => {
    const removing = type === 'DELETED' || pod.metadata?.deletionTimestamp !== undefined;
    if (!removing || forgotten.has(pod.spec?.nodeName ?? '')) return;
    // One verdict per pod: its first removal event (deletionTimestamp set, or DELETED at once).
    const uid = pod.metadata?.uid ?? '';
    if (judged.has(uid)) return;
    judged.add(uid);
    checks += 1;
    const observed = observePod(pod);
    const broken = neverDisruptedRemoval(observed, budgets);
    if (broken !== undefined) violations.push(`${new Date().toISOString()} ${broken}`);
    const why = protectedPodRemoval(observed, options.rollout, { driverDaemonSets: options.driverDaemonSets, nodeLabels: nodes.get(observed.nodeName)?.labels ?? {} });
    if (why === undefined) return;
    const operands = operandLabelsOf(observed, options.rollout);
    const seenPaused = pausedOn.get(observed.nodeName);
    if (operands.some((k) => seenPaused?.has(k) === true)) return;
    if (operands.length > 0) {
      unpaused.set(`${observed.namespace}/${observed.name}`, { node: observed.nodeName, labels: operands, why: `${new Date().toISOString()} ${why}` });
      return;
    }
    violations.push(`${new Date().toISOString()} ${why}`);
  };

  /** A watch that re-opens after the API server drops it (a restart is one of the faults). */
  type Handler = (type: string, object: V1Node & V1Pod) => void;
  const keepWatching = async (path: string, query: Record<string, string>, resourceVersion: string | undefined, handle: Handler): Promise<void> => {
    let rv = resourceVersion;
    for (;;) {
      if (stopped) return;
      const ended = new Promise<void>((resolve) => {
        new Watch(options.kc)
          .watch(path, { ...query, ...(rv === undefined ? {} : { resourceVersion: rv }) }, (type: string, object: V1Node & V1Pod) => {
            rv = object.metadata?.resourceVersion ?? rv;
            handle(type, object);
          }, () => {
            resolve();
          })
          .then((req) => requests.push(req), () => {
            resolve();
          });
      });
      await ended;
      await new Promise((r) => setTimeout(r, 500));
      // A resourceVersion too old after a long outage: start again from now (a gap, not a lie:
      // changes in the gap are not judged, which the settled check at the end still covers).
      rv = undefined;
    }
  };
  void keepWatching('/api/v1/nodes', { labelSelector: options.nodeSelector }, listed.metadata?.resourceVersion, onNode);
  for (const ns of options.podNamespaces) void keepWatching(`/api/v1/namespaces/${ns}/pods`, {}, undefined, onPod);

  return {
    violations,
    checks: () => checks,
    transitions: () => transitions,
    states: () => new Map([...nodes.values()].map((n) => [n.name, n.labels[options.rollout.stateKey] ?? 'unknown'])),
    until: (check, timeoutMs) =>
      new Promise<boolean>((settle) => {
        const done = (result: boolean): void => {
          clearTimeout(timer);
          waiters.delete(wake);
          settle(result);
        };
        const wake = (): void => {
          if (stopped) done(false);
          else if (check()) done(true);
        };
        const timer = setTimeout(() => {
          done(false);
        }, timeoutMs);
        waiters.add(wake);
        wake();
      }),
    blocked: (list) => {
      const observed = list.map(observeNode);
      return new Set(observed.filter((n) => blockedByLimit(n, observed, options.rollout, cordonedByAdmin) || haltedByBudget(n, observed, options.rollout)).map((n) => n.name));
    },
    forgetNode: (name) => {
      forgotten.add(name);
    },
    checkSettled: async () => {
      const final = (await core.listNode({ labelSelector: options.nodeSelector })).items.map(observeNode);
      const held = [...unpaused.values()].filter((h) => !forgotten.has(h.node)).map((h) => h.why);
      return [...held, ...settledViolations(final, options.rollout, cordonedByAdmin)];
    },
    stop: () => {
      stopped = true;
      for (const wake of [...waiters]) wake();
      for (const r of requests) r.abort();
    },
  };
}
