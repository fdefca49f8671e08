import { CoreV1Api, makeInformer, type KubeConfig, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MERGE_PATCH } from '../shared/kube/patch-options.ts';
import { hasExited } from '../shared/has-exited.ts';

const ROOT = resolve(import.meta.dirname, '..');
const NODE = resolve(ROOT, 'node_modules/.bin/node');

/**
 * Plays the kubelet for the driver DaemonSet's pods on KWOK nodes: for every pod bound to a
 * node, it runs the pod's init container and then its agent container as local processes
 * (`node <command>` from this repository), with the environment the pod spec declares, the
 * downward API resolved, and node-local paths pointed at a per-node directory (the node's
 * "host": its sysfs, module tree, run dir). When the pod is deleted the processes get SIGTERM,
 * as a container runtime would. KWOK itself keeps reporting the pod Running; its Ready
 * condition follows the agent's readiness gate.
 */
export interface ProcessKubeletOptions {
  readonly kubeConfig: KubeConfig;
  readonly kubeconfigPath: string;
  readonly namespace: string;
  readonly labelSelector: string;
  /** Per-node overrides of node-local paths (the node's simulated host). */
  readonly nodeEnv: (nodeName: string) => Promise<Record<string, string>>;
  readonly logDir: string;
  /**
   * Programs run in place of a container's own (`agent/main.ts` → the test entry point with the
   * simulated kernel): what a demo image would differ in. Paths relative to the repository.
   */
  readonly programSubstitutes?: Readonly<Record<string, string>>;
  /**
   * Restart containers that exit, as the kubelet does for a DaemonSet's pods (restartPolicy
   * Always; a failed init container too), after a back-off that doubles from `initialBackoffMs`
   * up to `maxBackoffMs` (the kubelet's 10 s … 5 min, shorter for tests), and report it in the
   * pod's status as the kubelet would: restartCount, state waiting CrashLoopBackOff, lastState
   * terminated with the exit code. Off by default (the demo shows a failure in the log).
   */
  readonly restart?: { readonly initialBackoffMs: number; readonly maxBackoffMs: number };
}

interface RunningPod {
  readonly uid: string;
  readonly pod: string;
  readonly node: string;
  child: ChildProcess | undefined;
  /** The container `child` runs. */
  container: string;
  stopped: boolean;
}

/** A container process running now (ProcessKubelet.running). */
export interface RunningContainer {
  readonly pod: string;
  readonly node: string;
  readonly container: string;
  /** SIGKILLs the process, as an OOM kill or a crash would end it (with restarts on, it runs again after back-off). */
  kill(): void;
}

export class ProcessKubelet {
  readonly #options: ProcessKubeletOptions;
  readonly #pods = new Map<string, RunningPod>();
  readonly #logs: WriteStream[] = [];
  #stopInformer: (() => Promise<void>) | undefined;
  #stopping = false;

  constructor(options: ProcessKubeletOptions) {
    this.#options = options;
  }

  async start(): Promise<void> {
    const { kubeConfig, namespace, labelSelector } = this.#options;
    await mkdir(this.#options.logDir, { recursive: true });
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const informer = makeInformer(kubeConfig, `/api/v1/namespaces/${namespace}/pods`, () => core.listNamespacedPod({ namespace, labelSelector }), labelSelector);
    const sync = (pod: V1Pod): void => {
      this.#sync(pod);
    };
    informer.on('add', sync);
    informer.on('update', sync);
    informer.on('delete', (pod) => {
      void this.#stopPod(pod.metadata?.uid ?? '');
    });
    // client-node informers stop on any error but 410: start again unless we are stopping.
    informer.on('error', () => {
      setTimeout(() => {
        if (!this.#stopping) informer.start().catch(() => undefined);
      }, 1_000).unref();
    });
    await informer.start();
    this.#stopInformer = () => informer.stop();
  }

  /** The container processes running now, one per pod (its init container or its main one). */
  running(): RunningContainer[] {
    return [...this.#pods.values()]
      .filter((r) => !r.stopped && r.child !== undefined && !hasExited(r.child))
      .map((r) => ({ pod: r.pod, node: r.node, container: r.container, kill: () => r.child?.kill('SIGKILL') }));
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#stopInformer?.();
    const exits = [...this.#pods.keys()].map((uid) => this.#stopPod(uid));
    await Promise.all(exits);
    for (const log of this.#logs) log.end();
  }

  #sync(pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    const nodeName = pod.spec?.nodeName;
    if (uid === undefined || nodeName === undefined) return;
    if (pod.metadata?.deletionTimestamp !== undefined) {
      void this.#stopPod(uid);
      return;
    }
    if (this.#pods.has(uid) || pod.status?.phase !== 'Running') return;
    const running: RunningPod = { uid, pod: pod.metadata?.name ?? '', node: nodeName, child: undefined, container: '', stopped: false };
    this.#pods.set(uid, running);
    void this.#runPod(pod, nodeName, running);
  }

  async #runPod(pod: V1Pod, nodeName: string, running: RunningPod): Promise<void> {
    const nodeEnv = await this.#options.nodeEnv(nodeName);
    const name = pod.metadata?.name ?? 'pod';
    const restart = this.#options.restart;
    const stopped = (): boolean => running.stopped;
    for (const container of pod.spec?.initContainers ?? []) {
      const run = (): Promise<number> => this.#runContainer(pod, container, nodeEnv, running, `${name}.${container.name}`);
      // Without restarts a failed init container ends the pod's run (the demo shows it in the log).
      const code = restart === undefined ? (stopped() ? 1 : await run()) : await this.#untilExitZero(pod, container, run, stopped, restart);
      if (code !== 0) return;
    }
    if (restart === undefined) {
      for (const container of pod.spec?.containers ?? []) {
        if (stopped()) return;
        await this.#runContainer(pod, container, nodeEnv, running, `${name}.${container.name}`);
      }
      return;
    }
    // One main container (the driver DaemonSets' pods have one): restarted whenever it exits.
    const container = pod.spec?.containers[0];
    if (container === undefined) return;
    for (let restarts = 1; !stopped(); restarts += 1) {
      const startedAt = new Date().toISOString();
      const code = await this.#runContainer(pod, container, nodeEnv, running, `${name}.${container.name}`);
      if (stopped()) return;
      await this.#backOff(pod, 'containerStatuses', container, restarts, { code, startedAt }, restart);
    }
  }

  /** An init container run again after back-off until it exits 0; 1 once the pod is stopped. */
  async #untilExitZero(pod: V1Pod, container: V1Container, run: () => Promise<number>, stopped: () => boolean, restart: NonNullable<ProcessKubeletOptions['restart']>): Promise<number> {
    for (let restarts = 1; !stopped(); restarts += 1) {
      const startedAt = new Date().toISOString();
      const code = await run();
      if (code === 0) return 0;
      if (stopped()) return 1;
      await this.#backOff(pod, 'initContainerStatuses', container, restarts, { code, startedAt }, restart);
    }
    return 1;
  }

  /**
   * After a container's exit: its status says CrashLoopBackOff with the restart count and the
   * exit, for the back-off's length; then it runs again (the status patch is best effort: the
   * pod may be gone).
   */
  async #backOff(
    pod: V1Pod,
    field: 'containerStatuses' | 'initContainerStatuses',
    container: V1Container,
    restartCount: number,
    exit: { code: number; startedAt: string },
    restart: NonNullable<ProcessKubeletOptions['restart']>,
  ): Promise<void> {
    const backoffMs = Math.min(restart.maxBackoffMs, restart.initialBackoffMs * 2 ** Math.min(restartCount - 1, 20));
    const podName = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? '';
    const core = this.#options.kubeConfig.makeApiClient(CoreV1Api);
    try {
      const current = await core.readNamespacedPodStatus({ name: podName, namespace });
      const others = (current.status?.[field] ?? []).filter((c) => c.name !== container.name);
      const status = {
        name: container.name,
        image: container.image ?? '',
        imageID: '',
        ready: false,
        started: false,
        restartCount,
        state: { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${Math.round(backoffMs / 1000)}s restarting failed container=${container.name} pod=${podName}_${namespace}(${pod.metadata?.uid ?? ''})` } },
        lastState: { terminated: { exitCode: exit.code, reason: exit.code === 0 ? 'Completed' : 'Error', startedAt: exit.startedAt, finishedAt: new Date().toISOString() } },
      };
      await core.patchNamespacedPodStatus({ name: podName, namespace, body: { status: { [field]: [...others, status] } } }, MERGE_PATCH);
    } catch {
      // The pod is being deleted, or the API server is away for a moment: the next exit reports again.
    }
    await sleep(backoffMs);
  }

  async #runContainer(pod: V1Pod, container: V1Container, nodeEnv: Record<string, string>, running: RunningPod, logName: string): Promise<number> {
    const [program, ...args] = container.command ?? [];
    if (program !== 'node') throw new Error(`demo kubelet runs only node containers, not ${String(program)}`);
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', KUBECONFIG: this.#options.kubeconfigPath };
    // The API server omits empty values: an entry with neither value nor valueFrom is "".
    for (const e of container.env ?? []) env[e.name] = e.valueFrom === undefined ? (e.value ?? '') : fieldRef(pod, e.valueFrom.fieldRef?.fieldPath);
    Object.assign(env, nodeEnv);
    const log = createWriteStream(join(this.#options.logDir, `${logName}.log`), { flags: 'a' });
    this.#logs.push(log);
    const substitutes = this.#options.programSubstitutes ?? {};
    const argv = args.map((arg) => substitutes[arg] ?? arg);
    const child = spawn(NODE, [...argv, ...(container.args ?? [])], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    running.child = child;
    running.container = container.name;
    return await new Promise<number>((settle) => {
      child.on('close', (code) => {
        settle(code ?? 1);
      });
    });
  }

  async #stopPod(uid: string): Promise<void> {
    const running = this.#pods.get(uid);
    if (running === undefined || running.stopped) return;
    running.stopped = true;
    const child = running.child;
    if (child === undefined || hasExited(child)) return;
    await new Promise<void>((settle) => {
      // A container runtime kills what does not stop within the grace period; so do we (10 s).
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.on('close', () => {
        clearTimeout(timer);
        settle();
      });
      child.kill('SIGTERM');
    });
  }
}

function fieldRef(pod: V1Pod, path: string | undefined): string {
  switch (path) {
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? '';
    case 'metadata.name':
      return pod.metadata?.name ?? '';
    case 'metadata.namespace':
      return pod.metadata?.namespace ?? '';
    default:
      throw new Error(`demo kubelet cannot resolve fieldRef ${String(path)}`);
  }
}
