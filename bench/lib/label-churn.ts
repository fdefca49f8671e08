/**
 * Label churn from other writers, as NFD and GPU Feature Discovery make it on GPU nodes: each
 * rewrites its labels of every node once per sleep interval (60 s by default for both), through
 * nfd-master's JSON Patch of the Node with no resourceVersion. GFD's own
 * `nvidia.com/gfd.timestamp` changes on every write, so every write stores a new resourceVersion
 * of the Node: the churn that makes a write guarded by a resourceVersion conflict (the
 * coordinator's cordon writes test only the fields they are made from, so it makes them none). Here every
 * write of either writer changes one value (its generation), the worst case of that.
 *
 * Pure: the labels of a writer's generation, the patch that writes them, and which of them a
 * node no longer carries (our writes must never drop another writer's labels).
 */
import { jsonPointer, type JsonPatchOperation } from '../../shared/kube/json-patch.ts';

/** One writer of churn: its name and its labels at a generation (1, 2, ...). */
export interface ChurnWriter {
  readonly name: string;
  labels(generation: number): Readonly<Record<string, string>>;
}

/** NFD-style feature labels (nfd-worker's sources through nfd-master); `kernel-version.revision` carries the generation. */
export const NFD_WRITER: ChurnWriter = {
  name: 'nfd',
  labels: (generation) => ({
    'feature.node.kubernetes.io/cpu-cpuid.AVX512F': 'true',
    'feature.node.kubernetes.io/cpu-model.vendor_id': 'Intel',
    'feature.node.kubernetes.io/kernel-version.major': '6',
    'feature.node.kubernetes.io/kernel-version.revision': String(generation),
    'feature.node.kubernetes.io/pci-10de.present': 'true',
    'feature.node.kubernetes.io/system-os_release.ID': 'debian',
  }),
};

/** GFD-style GPU labels; `nvidia.com/gfd.timestamp` changes every write, as GFD's does. */
export const GFD_WRITER: ChurnWriter = {
  name: 'gfd',
  labels: (generation) => ({
    'nvidia.com/gfd.timestamp': String(1_800_000_000 + generation),
    'nvidia.com/gpu.count': '8',
    'nvidia.com/gpu.family': 'hopper',
    'nvidia.com/gpu.memory': '81559',
    'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3',
    'nvidia.com/gpu.replicas': '1',
  }),
};

export const CHURN_WRITERS: readonly ChurnWriter[] = [NFD_WRITER, GFD_WRITER];

/**
 * The JSON Patch that sets `labels` on a Node, as nfd-master sends it: `add` replaces a label
 * that exists.
 */
export function labelPatch(labels: Readonly<Record<string, string>>): JsonPatchOperation[] {
  return Object.entries(labels).map(([key, value]) => ({ op: 'add', path: jsonPointer('metadata', 'labels', key), value }));
}

/**
 * The labels a writer last stored (its generation acknowledged last, per node) that a node does
 * not carry with that value: `writer/node/key` each. A node the writer never wrote has nothing
 * to lose. `nodes` maps a node's name to its labels as read after the writers stopped.
 */
export function lostChurnLabels(
  nodes: ReadonlyMap<string, Readonly<Record<string, string>>>,
  lastStored: Readonly<Record<string, Readonly<Record<string, number>>>>,
  writers: readonly ChurnWriter[] = CHURN_WRITERS,
): string[] {
  const lost: string[] = [];
  for (const writer of writers) {
    for (const [node, generation] of Object.entries(lastStored[writer.name] ?? {})) {
      const now = nodes.get(node) ?? {};
      for (const [key, value] of Object.entries(writer.labels(generation))) if (now[key] !== value) lost.push(`${writer.name}/${node}/${key}`);
    }
  }
  return lost;
}

/**
 * When a writer's `sequence`-th write is due, in ms from the churn's start: each writer writes
 * its `count` nodes in turn, one round per `intervalMs`, spread evenly over the round (a steady
 * rate at the API server); the writer at `writerIndex` (of `writers`) is shifted by its share of
 * the interval, so each node is written at even spacing by the writers in turn. The write is of
 * node `sequence % count`, at generation `churnGeneration(sequence, count)`.
 */
export function churnDueMs(sequence: number, count: number, intervalMs: number, writerIndex: number, writers: number): number {
  const round = Math.floor(sequence / count);
  const shift = (writerIndex / Math.max(1, writers)) * intervalMs;
  return round * intervalMs + ((sequence % count) * intervalMs) / count + shift;
}

/** The generation (1, 2, ...) a writer's `sequence`-th write stores: its round, counted from 1. */
export function churnGeneration(sequence: number, count: number): number {
  return Math.floor(sequence / count) + 1;
}
