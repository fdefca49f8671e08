/**
 * Evicting pods through the Eviction API, shared by pod deletion and drain: which PDB or refusal
 * blocks a pod, and which evictions are due now (a refused one is retried EVICTION_RETRY_MS
 * later, as `kubectl drain` does).
 */
import { matchesSelector } from '../policy/label-selector.ts';
import type { NodeAction } from './action.ts';
import type { PdbSnapshot, PodSnapshot } from './snapshot.ts';
import type { StepContext } from './step.ts';

/** How long after a refused eviction (HTTP 429) the pod is tried again (kubectl drain waits 5 s). */
export const EVICTION_RETRY_MS = 5_000;

/** Why evicting the pod is (or is likely) refused: a PDB with no disruption allowed, or the API's last refusal. */
export function evictionBlock(pod: PodSnapshot, ctx: StepContext): string | null {
  const pdbs = ctx.pdbsByNamespace.get(pod.namespace);
  const pdb = pdbs === undefined ? null : blockingPdb(pod, pdbs);
  if (pdb !== null) return `PDB ${pdb.namespace}/${pdb.name} blocks eviction of ${pod.namespace}/${pod.name}`;
  if (pod.evictionBlocked !== undefined) return `eviction of ${pod.namespace}/${pod.name} refused: ${pod.evictionBlocked.message}`;
  return null;
}

/** The blocks of every pod not yet terminating, in order. */
export function evictionBlocks(pods: readonly PodSnapshot[], ctx: StepContext): string[] {
  const blocks: string[] = [];
  for (const p of pods) {
    if (p.deleting) continue;
    const why = evictionBlock(p, ctx);
    if (why !== null) blocks.push(why);
  }
  return blocks;
}

/**
 * Evictions to send now for the pods not yet terminating, and the earliest time (ms) a refused
 * one is due again, or `wakeAt` if that is earlier.
 */
export function dueEvictions(node: string, pods: readonly PodSnapshot[], ctx: StepContext, wakeAt: number | null): { actions: NodeAction[]; wakeAt: number | null } {
  const actions: NodeAction[] = [];
  let next = wakeAt;
  for (const p of pods) {
    if (p.deleting) continue;
    const retryAt = p.evictionBlocked === undefined ? null : p.evictionBlocked.at + EVICTION_RETRY_MS;
    if (retryAt !== null && ctx.now < retryAt) {
      next = next === null ? retryAt : Math.min(next, retryAt);
      continue;
    }
    actions.push({ kind: 'evictPod', node, pod: { namespace: p.namespace, name: p.name, uid: p.uid } });
  }
  return { actions, wakeAt: next };
}

function blockingPdb(pod: PodSnapshot, pdbs: readonly PdbSnapshot[]): PdbSnapshot | null {
  for (const pdb of pdbs) {
    if (pdb.disruptionsAllowed <= 0 && pdb.selector !== null && matchesSelector(pdb.selector, pod.labels)) return pdb;
  }
  return null;
}
