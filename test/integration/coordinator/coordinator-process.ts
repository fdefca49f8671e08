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
  /** Resolves once a log line's `msg` equals `message` (e.g. 'coordinator started'). */
  logged(message: string): Promise<void>;
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
      '--log-level', 'info',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const messages: string[] = [];
  const listeners: (() => void)[] = [];
  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      try {
        messages.push((JSON.parse(line) as { msg?: string }).msg ?? '');
      } catch {
        messages.push(line);
      }
    }
    for (const l of listeners) l();
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      resolve(code);
    });
  });
  return {
    identity,
    child,
    exited,
    logged(message) {
      return new Promise((resolve) => {
        const check = (): void => {
          if (messages.includes(message)) resolve();
        };
        listeners.push(check);
        check();
      });
    },
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
