import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { isNotFound } from '../../../shared/kube/api-error.ts';
import { startProgram } from '../../bed/program-process.ts';

export interface CoordinatorProcess {
  readonly identity: string;
  readonly pid: number;
  /** The exit code, or null when a signal ended it. */
  readonly exited: Promise<number | null>;
  /** Sends `signal` unless it has exited already; resolves with the exit code (null: a signal ended it). */
  kill(signal: NodeJS.Signals): Promise<number | null>;
  /** Resolves once a log line's `msg` equals `message` (e.g. 'coordinator started'); fails if it exits first or after `timeoutMs` (60 s). */
  logged(message: string, timeoutMs?: number): Promise<void>;
  /** False once the process has exited. */
  isRunning(): boolean;
}

/**
 * `node coordinator/main.ts` as a separate process, as it runs in a pod (2 s lease for tests),
 * with the test runner's environment; its stderr goes to the runner's.
 */
export function spawnCoordinator(kubeconfigPath: string, namespace: string, identity: string): CoordinatorProcess {
  const coordinator = startProgram('coordinator/main.ts', {
    env: {},
    inheritEnv: true,
    inheritStderr: true,
    args: [
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
  });
  let running = true;
  const exited = coordinator.exit.then(({ code }) => {
    running = false;
    return code;
  });
  return {
    identity,
    pid: coordinator.pid,
    exited,
    isRunning: () => running,
    async logged(message, timeoutMs) {
      await coordinator.logLine((line) => line.msg === message, timeoutMs);
    },
    async kill(signal) {
      coordinator.signal(signal);
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
