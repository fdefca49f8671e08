import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { isNotFound } from '../../../shared/kube/api-error.ts';

const NODE = fileURLToPath(new URL('../../../node_modules/.bin/node', import.meta.url));
const MAIN = fileURLToPath(new URL('../../../coordinator/main.ts', import.meta.url));

export interface CoordinatorProcess {
  readonly identity: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  kill(signal: NodeJS.Signals): Promise<number | null>;
}

/** `node coordinator/main.ts` as a separate process, as it runs in a pod (2 s lease for tests). */
export function spawnCoordinator(kubeconfigPath: string, namespace: string, identity: string): CoordinatorProcess {
  const child = spawn(
    NODE,
    [
      MAIN,
      '--kubeconfig', kubeconfigPath,
      '--namespace', namespace,
      '--lease-namespace', namespace,
      '--lease-name', 'coordinator',
      '--identity', identity,
      '--lease-duration-seconds', '2',
      '--renew-deadline-seconds', '1.5',
      '--retry-period-seconds', '0.2',
      '--metrics-port', '0',
      '--log-level', 'warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      resolve(code);
    });
  });
  return {
    identity,
    child,
    exited,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

export async function leaseHolder(kc: KubeConfig, namespace: string): Promise<string | undefined> {
  try {
    const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'coordinator', namespace });
    return lease.spec?.holderIdentity === '' ? undefined : lease.spec?.holderIdentity;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}
