/**
 * A small world for multi-pass tests, standing in for the API server, kubelet and controllers
 * only in what the planner reads: the executor's effects (with PDBs refusing evictions) and the
 * cluster's answers (terminating pods go away, the DaemonSet recreates deleted driver pods at its
 * newest revision, pods become Ready, job pods finish, the init container sets safe load).
 *
 * Driver pods behave like the real agent: it never exits on a build or load failure, so a bad
 * driver never raises restartCount; it shows a failure reason on its readiness-gate condition
 * (CompileFailed) between in-process retries (Building), and a good one turns Loaded and Ready.
 */
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import type { NodeAction, Plan } from '../../../../coordinator/plan/action.ts';
import { matchesSelector } from '../../../../coordinator/policy/label-selector.ts';
import type { ClusterSnapshot, NodeSnapshot, PodSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { KEYS } from './fixtures.ts';

/** Deterministic PRNG (mulberry32), so a failing fast-check case replays exactly. */
export function randomFrom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface WorldOptions {
  /** Probability per pass that a terminating pod is gone, a new driver pod becomes Ready, a job pod finishes. */
  readonly progress: number;
  /** Driver pods created from now on never become Ready: their agent reports CompileFailed between retries (a bad driver). */
  readonly badDriver?: boolean;
  /** New driver pods' init containers ask for a safe load. */
  readonly safeLoad?: boolean;
}

/**
 * Executes a plan like the executor: node by node, in order, a plan that names another node in
 * `after` only once that node's plan has run in full; `keep(node)` says how many of a node's
 * actions run before a simulated failure (all by default). Evictions a PDB forbids are refused
 * (recorded as evictionBlocked), everything else is applied.
 */
export function execute(snapshot: ClusterSnapshot, plan: Plan, now: number, keep: (node: string, count: number) => number = (_n, c) => c): ClusterSnapshot {
  const applied: NodeAction[] = [];
  const refused = new Map<string, string>();
  /** Nodes whose plan ran in full. */
  const complete = new Set<string>();
  const runPlan = (nodePlan: Plan['nodePlans'][number]): void => {
    const kept = keep(nodePlan.node, nodePlan.actions.length);
    for (const action of nodePlan.actions.slice(0, kept)) {
      // As the executor: the rest of the list only if the node's pods are those planned on.
      if (action.kind === 'requireSamePods' && !hasPods(snapshot, action.node, action.podUids)) return;
      if (action.kind === 'evictPod') {
        const pdb = refusingPdb(snapshot, action.node, action.pod.uid);
        if (pdb !== null) {
          refused.set(action.pod.uid, `Cannot evict pod as it would violate the pod's disruption budget ${pdb}.`);
          continue;
        }
      }
      applied.push(action);
    }
    if (kept === nodePlan.actions.length) complete.add(nodePlan.node);
  };
  for (const nodePlan of plan.nodePlans) if (nodePlan.after === undefined) runPlan(nodePlan);
  for (const nodePlan of plan.nodePlans) if (nodePlan.after !== undefined && complete.has(nodePlan.after)) runPlan(nodePlan);
  const after = applyActions(snapshot, applied);
  if (refused.size === 0) return after;
  return {
    ...after,
    nodes: after.nodes.map((n) => ({
      ...n,
      pods: n.pods.map((p) => {
        const message = refused.get(p.uid);
        return message === undefined ? p : { ...p, evictionBlocked: { at: now, message } };
      }),
    })),
  };
}

function hasPods(snapshot: ClusterSnapshot, nodeName: string, uids: readonly string[]): boolean {
  const node = snapshot.nodes.find((n) => n.name === nodeName);
  const now = node === undefined ? [] : [...node.driverPods, ...node.pods].map((p) => p.uid);
  return now.length === uids.length && now.every((uid) => uids.includes(uid));
}

function refusingPdb(snapshot: ClusterSnapshot, nodeName: string, uid: string): string | null {
  const pod = snapshot.nodes.find((n) => n.name === nodeName)?.pods.find((p) => p.uid === uid);
  if (pod === undefined) return null;
  const pdb = snapshot.pdbs.find((b) => b.namespace === pod.namespace && b.disruptionsAllowed <= 0 && b.selector !== null && matchesSelector(b.selector, pod.labels));
  return pdb === undefined ? null : `${pdb.namespace}/${pdb.name}`;
}

let generation = 0;

const BUILDING = { status: 'False', reason: 'Building', message: 'building the gpu driver' } as const;
const FAILED = { status: 'False', reason: 'CompileFailed', message: 'Failed: make exited with 2' } as const;
const LOADED = { status: 'True', reason: 'Loaded', message: 'gpu driver loaded' } as const;

/** One tick of the cluster's own behaviour. */
export function evolve(snapshot: ClusterSnapshot, random: () => number, options: WorldOptions): ClusterSnapshot {
  const newest = new Map(snapshot.daemonSets.map((d) => [d.name, d.updatedRevisionHash]));
  return { ...snapshot, nodes: snapshot.nodes.map((n) => evolveNode(n, newest, random, options)) };
}

function evolveNode(node: NodeSnapshot, newest: ReadonlyMap<string, string | null>, random: () => number, options: WorldOptions): NodeSnapshot {
  const chance = (): boolean => random() < options.progress;
  let annotations = node.annotations;
  const driverPods = node.driverPods.flatMap((pod) => {
    if (!pod.deleting) {
      const blocked = annotations[KEYS.waitForSafeLoad] !== undefined && pod.revisionHash === newest.get(pod.daemonSet);
      if (pod.ready || blocked) return [pod];
      if (options.badDriver ?? false) {
        // The agent alternates between a retry and its failure; the container never restarts.
        const agentCondition = chance() ? FAILED : BUILDING;
        return [{ ...pod, agentCondition }];
      }
      return [chance() ? { ...pod, ready: true, phase: 'Running' as const, agentCondition: LOADED } : { ...pod, agentCondition: BUILDING }];
    }
    if (!chance()) return [pod];
    // The DaemonSet (OnDelete) replaces the deleted pod at its newest revision.
    if (options.safeLoad ?? false) annotations = { ...annotations, [KEYS.waitForSafeLoad]: 'true' };
    generation++;
    return [{ ...pod, name: `${pod.daemonSet}-${node.name}-${generation}`, uid: `driver-${generation}`, revisionHash: newest.get(pod.daemonSet) ?? null, ready: false, restartCount: 0, deleting: false, agentCondition: null }];
  });
  const pods = node.pods.flatMap((pod): PodSnapshot[] => {
    if (pod.deleting) return chance() ? [] : [pod];
    if (pod.labels.app === 'train' && pod.phase === 'Running' && chance()) return [{ ...pod, phase: 'Succeeded', ready: false }];
    return [pod];
  });
  return { ...node, annotations, driverPods, pods };
}
