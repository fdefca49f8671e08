import type { TestProject } from 'vitest/node';
import { startControlPlane, type ControlPlane } from '../bed/control-plane.ts';
import './real-node-cluster.ts';
import { OTHER_NODE, REAL_NODE_LABEL } from './real-node-cluster.ts';

let plane: ControlPlane | undefined;

/**
 * One bring-up for the whole project: the `real-node` control plane (full + a real kubelet node
 * running the project's images) and one KWOK node beside it; stopped (and the host restored)
 * after the run.
 */
export async function setup(project: TestProject): Promise<void> {
  const started = Date.now();
  plane = await startControlPlane({ profile: 'real-node', nodes: [{ name: OTHER_NODE }], realNodeLabels: { [REAL_NODE_LABEL]: 'true' } });
  const node = plane.realNode;
  if (node === undefined) throw new Error('the real-node profile started no real node');
  process.stderr.write(`[test-bed] real-node control plane ready in ${Date.now() - started} ms (${plane.server}, ${plane.workDir})\n`);
  project.provide('realNodeKubeconfigPath', plane.kubeconfigPath);
  project.provide('realNode', { name: node.name, dir: node.dir, imagesDir: node.imagesDir, server: plane.server, binDir: plane.binDir, podApi: node.podApi });
}

export async function teardown(): Promise<void> {
  const started = Date.now();
  await plane?.stop();
  process.stderr.write(`[test-bed] real-node control plane stopped in ${Date.now() - started} ms\n`);
}
