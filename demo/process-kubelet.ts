import { CoreV1Api, makeInformer, type KubeConfig, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';

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
}

interface RunningPod {
  readonly uid: string;
  child: ChildProcess | undefined;
  stopped: boolean;
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
    const running: RunningPod = { uid, child: undefined, stopped: false };
    this.#pods.set(uid, running);
    void this.#runPod(pod, nodeName, running);
  }

  async #runPod(pod: V1Pod, nodeName: string, running: RunningPod): Promise<void> {
    const nodeEnv = await this.#options.nodeEnv(nodeName);
    const name = pod.metadata?.name ?? 'pod';
    for (const container of pod.spec?.initContainers ?? []) {
      if (running.stopped) return;
      const code = await this.#runContainer(pod, container, nodeEnv, running, `${name}.${container.name}`);
      if (code !== 0) return; // a real kubelet would restart it; the demo shows the failure in the log
    }
    for (const container of pod.spec?.containers ?? []) {
      if (running.stopped) return;
      await this.#runContainer(pod, container, nodeEnv, running, `${name}.${container.name}`);
    }
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
    if (child === undefined || child.exitCode !== null) return;
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
