import type { TestProject } from 'vitest/node';
import { startControlPlane, type ControlPlane } from './control-plane.ts';
import './shared-cluster.ts';

let plane: ControlPlane | undefined;

/** Starts the `full` control plane every integration test shares; stops it after the run. */
export async function setup(project: TestProject): Promise<void> {
  const started = Date.now();
  plane = await startControlPlane({ profile: 'full' });
  process.stderr.write(`[test-bed] full control plane ready in ${Date.now() - started} ms (${plane.server}, ${plane.workDir})\n`);
  project.provide('kubeconfigPath', plane.kubeconfigPath);
  project.provide('testBedBinDir', plane.binDir);
}

export async function teardown(): Promise<void> {
  await plane?.stop();
}
