import { KubeConfig } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inject } from 'vitest';

/** Label the real node carries (kubelet --node-labels); the shipped pods are scheduled by it. */
export const REAL_NODE_LABEL = 'driver-rollout.test/real-node';
/** A KWOK node beside the real one: "another node" for the admission policy. */
export const OTHER_NODE = 'kwok-node-1';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin kubeconfig of the `real-node` control plane that test/real-node/global-setup.ts started. */
    realNodeKubeconfigPath: string;
    realNode: RealNodeInfo;
  }
}

/** The real node, as global-setup.ts provides it. */
export interface RealNodeInfo {
  name: string;
  dir: string;
  imagesDir: string;
  server: string;
  binDir: string;
  /** Where pods outside the host's network reach the API server (a hostAlias of `host` to `ip`). */
  podApi: { host: string; ip: string; port: number };
}

/** Inside a real-node test: the run's control plane and its real node. */
export function realNodeCluster(): {
  kubeConfig(): KubeConfig;
  kubeconfigPath: string;
  binDir: string;
  node: RealNodeInfo;
  apiPort: number;
  containerLog(namespace: string, pod: string, container: string): Promise<string>;
} {
  const path = inject('realNodeKubeconfigPath');
  const node = inject('realNode');
  return {
    kubeConfig: () => {
      const kc = new KubeConfig();
      kc.loadFromFile(path);
      return kc;
    },
    kubeconfigPath: path,
    binDir: node.binDir,
    node,
    apiPort: Number(new URL(node.server).port),
    containerLog: async (namespace, pod, container) => await readContainerLog(join(node.dir, 'pod-logs'), namespace, pod, container),
  };
}

/** The kubelet's log files: <podLogsDir>/<ns>_<pod>_<uid>/<container>/<restart>.log, CRI format (kubectl logs cannot reach a node without an address). */
export async function readContainerLog(podLogs: string, namespace: string, pod: string, container: string): Promise<string> {
  const { readdir } = await import('node:fs/promises');
  const podDir = (await readdir(podLogs)).find((d) => d.startsWith(`${namespace}_${pod}_`));
  if (podDir === undefined) return '';
  const files = (await readdir(join(podLogs, podDir, container)).catch(() => [] as string[])).sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10));
  const parts = await Promise.all(files.map(async (f) => await readFile(join(podLogs, podDir, container, f), 'utf8')));
  // Each CRI log line: <time> <stream> <P|F> <text>.
  return parts.join('').split('\n').map((l) => l.split(' ').slice(3).join(' ')).join('\n');
}
