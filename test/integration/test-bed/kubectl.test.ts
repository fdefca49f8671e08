import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFakeNodes, deleteFakeNodes } from '../../bed/fake-nodes.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { TEST_NODE_LABEL, uniqueTestId } from './fixtures.ts';

const run = promisify(execFile);
const cluster = sharedCluster();
const id = uniqueTestId('kubectl');
const nodeNames = [`${id}-1`, `${id}-2`];

beforeAll(async () => {
  await createFakeNodes(cluster.kubeConfig(), nodeNames.map((name) => ({ name, labels: { [TEST_NODE_LABEL]: id } })));
});

afterAll(async () => {
  await deleteFakeNodes(cluster.kubeConfig(), nodeNames);
});

describe('the built kubectl', () => {
  it('lists the fake nodes, Ready, with the generated kubeconfig', async () => {
    const { stdout } = await run(join(cluster.binDir, 'kubectl'), [
      `--kubeconfig=${cluster.kubeconfigPath}`, 'get', 'nodes', '-l', `${TEST_NODE_LABEL}=${id}`, '--no-headers',
    ]);
    const rows = stdout.trim().split('\n').map((line) => line.split(/\s+/));
    expect(rows.map((r) => r[0]).sort()).toEqual(nodeNames);
    for (const row of rows) expect(row[1]).toBe('Ready');
  });

  it('reports the pinned server version', async () => {
    const { stdout } = await run(join(cluster.binDir, 'kubectl'), [`--kubeconfig=${cluster.kubeconfigPath}`, 'version', '-o', 'json']);
    const version = JSON.parse(stdout) as { serverVersion?: { gitVersion?: string } };
    expect(version.serverVersion?.gitVersion).toMatch(/^v1\.36\./);
  });
});
