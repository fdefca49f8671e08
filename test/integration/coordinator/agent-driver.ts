/**
 * The real agent as a test's driver DaemonSet: the pod template runs `node agent/main.ts` and the
 * demo's process kubelet (demo/process-kubelet.ts) runs it, through the test entry point
 * test/doubles/simulated-agent-main.ts, as a local process for every driver pod KWOK binds. Its
 * node-local paths point at a per-node directory, the node's simulated host: GPUs in sysfs, its
 * module tree, run dir and device files, and the simulated kernel's state kept across pod
 * restarts as a real kernel keeps its modules. The agent really compiles the sample driver with
 * kbuild against the installed headers; only the final module load goes to the simulated kernel.
 */
import type { V1DaemonSet, V1EnvVar } from '@kubernetes/client-node';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessKubelet, type ProcessKubeletOptions, type RunningContainer } from '../../../demo/process-kubelet.ts';
import { pathExists, readTextIfExists } from '../../../shared/fs/if-exists.ts';
import { driverKeys } from '../../../shared/keys.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { aGpuNode } from '../../fixtures/sysfs/sysfs-tree.ts';
import { writeSampleDriverSource } from '../../unit/agent/agent-fixtures.ts';
import { installedHeadersKernel } from '../../unit/agent/build/sample-driver.ts';
import type { RolloutWorld } from './harness.ts';

/**
 * Lease timing for a coordinator beside real agents and their kbuilds: the harness's 2 s lease
 * is lost again and again when the shared machine is busy (the coordinator then pauses), and
 * one coordinator needs no fast failover.
 */
export const AGENT_TEST_LEASE = { leaseDurationSeconds: 15, renewDeadlineMs: 10_000, retryPeriodMs: 1_000 } as const;

/** The module the driver DaemonSet loads (drsample_core comes along as its dependency). */
export const AGENT_DRIVER_MODULE = 'drsample_net';

export class AgentDriver {
  readonly world: RolloutWorld;
  readonly work: string;
  readonly kernel = installedHeadersKernel();
  readonly #kubelets: ProcessKubelet[] = [];

  readonly #kubeconfigPath: string;
  readonly #restart: ProcessKubeletOptions['restart'];
  readonly #cacheDir: string;

  private constructor(world: RolloutWorld, work: string, kubeconfigPath: string, options: { restart?: ProcessKubeletOptions['restart']; cacheDir?: string }) {
    this.world = world;
    this.work = work;
    this.#kubeconfigPath = kubeconfigPath;
    this.#restart = options.restart;
    this.#cacheDir = options.cacheDir ?? join(work, 'module-cache');
  }

  /** The container processes the kubelets run now (ProcessKubelet.running). */
  running(): RunningContainer[] {
    return this.#kubelets.flatMap((k) => k.running());
  }

  /**
   * Starts the process kubelet for the world's driver pods; stopped (agents SIGTERMed) when the
   * test ends. Outside a vitest run (npm run chaos) name the control plane's kubeconfig; with
   * `restart` the kubelet restarts exited containers (ProcessKubelet's restart); `cacheDir`: the
   * agents' module cache (default: in the test's work dir, so every test compiles).
   */
  static async start(world: RolloutWorld, options: { kubeconfigPath?: string; restart?: ProcessKubeletOptions['restart']; cacheDir?: string } = {}): Promise<AgentDriver> {
    const driver = new AgentDriver(world, await mkdtemp(join(tmpdir(), `${world.id}-`)), options.kubeconfigPath ?? sharedCluster().kubeconfigPath, options);
    world.onTearDown(async () => {
      for (const kubelet of driver.#kubelets.splice(0).reverse()) await kubelet.stop();
      await rm(driver.work, { recursive: true, force: true });
    });
    await driver.runPods('app=driver');
    return driver;
  }

  /**
   * Runs the world's pods matching `labelSelector` as local processes too (e.g. a device client
   * DaemonSet running test/doubles/simulated-device-client.ts), with the same node hosts. A second
   * driver's DaemonSet names its `driver`: its agents get their own lock, ready file and module
   * root on the node (as each driver's DaemonSet mounts its own) and share the node's kernel;
   * with `loadsAfterWorldDriver` their host tree (where their inbox dependencies come from) is
   * the world driver's module root, as nvidia_peermem finds ib_core in MOFED's.
   */
  async runPods(labelSelector: string, driver?: { readonly name: string; readonly loadsAfterWorldDriver?: boolean }): Promise<void> {
    const kubelet = new ProcessKubelet({
      kubeConfig: this.world.kc,
      kubeconfigPath: this.#kubeconfigPath,
      namespace: this.world.ns.name,
      labelSelector,
      logDir: this.logDir(),
      nodeEnv: (node) => this.hostEnv(node, driver),
      // The template's `node agent/main.ts`, with the simulated kernel (a test double) wired in.
      programSubstitutes: { 'agent/main.ts': 'test/doubles/simulated-agent-main.ts' },
      ...(this.#restart === undefined ? {} : { restart: this.#restart }),
    });
    await kubelet.start();
    this.#kubelets.push(kubelet);
  }

  /**
   * The sample driver's sources at `version` (a new version, a new srcversion); with `modules`,
   * a driver of its own that builds only those (drsample_core alone stands for ib_core's stack,
   * drsample_net alone for nvidia_peermem, built against drsample_core's Module.symvers).
   */
  async source(version: string, modules?: readonly ('drsample_core' | 'drsample_net')[]): Promise<string> {
    const dir = await writeSampleDriverSource(join(this.work, 'src', modules === undefined ? version : `${modules.join('+')}-${version}`), version);
    if (modules !== undefined) await writeFile(join(dir, 'Kbuild'), `obj-m += ${modules.map((m) => `${m}.o`).join(' ')}\n`);
    return dir;
  }

  /**
   * The sample driver at `version`, written against an API this kernel no longer has
   * (`pci_set_dma_mask`, removed in Linux 5.18): kbuild fails with an implicit declaration error,
   * as an old driver branch does on a new kernel.
   */
  async sourceThatFailsToCompile(version: string): Promise<string> {
    const dir = await this.source(version);
    await appendFile(
      join(dir, 'drsample_net.c'),
      '\n#include <linux/pci.h>\nint drsample_net_set_mask(struct pci_dev *pdev)\n{\n\treturn pci_set_dma_mask(pdev, DMA_BIT_MASK(64));\n}\nEXPORT_SYMBOL(drsample_net_set_mask);\n',
    );
    return dir;
  }

  /**
   * The DaemonSet (OnDelete, readiness gate on the agent's condition) running the agent at
   * `version`; `driver` (default the world's) and its `modules` (default the sample driver's two),
   * the last of which the agent loads, bringing its dependencies.
   */
  daemonSet(version: string, sourceDir: string, extraEnv: Record<string, string> = {}, options: { safeLoadGate?: boolean; driver?: string; modules?: readonly string[] } = {}): V1DaemonSet {
    const world = this.world;
    const driver = options.driver ?? world.driver;
    const keys = driverKeys(driver, world.keys.domain);
    const modules = options.modules ?? ['drsample_core', AGENT_DRIVER_MODULE];
    const field = (name: string, fieldPath: string): V1EnvVar => ({ name, valueFrom: { fieldRef: { fieldPath } } });
    const env: V1EnvVar[] = [
      field('NODE_NAME', 'spec.nodeName'),
      field('POD_NAME', 'metadata.name'),
      field('POD_NAMESPACE', 'metadata.namespace'),
      ...Object.entries({
        DRIVER_NAME: driver,
        KEY_DOMAIN: world.keys.domain,
        DEVICE_KIND: 'gpu',
        DRIVER_VERSION: version,
        DRIVER_SOURCE_DIR: sourceDir,
        DRIVER_MODULES: modules.at(-1) ?? AGENT_DRIVER_MODULE,
        KERNEL_ADAPTER: 'simulated',
        // No background builds for the machine's other kernel headers: the shared 2 cores are busy enough.
        NEXT_KERNEL_PREFLIGHT: 'false',
        ...extraEnv,
      }).map(([name, value]) => ({ name, value })),
    ];
    // The real init container (init-container/main.ts), as manifests/driver-daemonset.yaml runs it: safe load on, no timeout.
    const gate = {
      name: 'safe-load-gate',
      image: `driver-rollout/init-container:${version}`,
      command: ['node', 'init-container/main.ts'],
      env: [
        field('NODE_NAME', 'spec.nodeName'),
        ...Object.entries({ DRIVER_NAME: driver, KEY_DOMAIN: world.keys.domain, SAFE_LOAD_ENABLED: 'true', WAIT_TIMEOUT_SECONDS: '0', PREFLIGHT_MODULES: modules.join(',') }).map(([name, value]) => ({ name, value })),
      ],
    };
    return world.daemonSetWith({
      ...(options.safeLoadGate === true ? { initContainers: [gate] } : {}),
      terminationGracePeriodSeconds: 5,
      readinessGates: [{ conditionType: keys.driverReadyCondition }],
      containers: [{ name: 'agent', image: `driver-rollout/agent:${version}`, command: ['node', 'agent/main.ts'], env }],
    });
  }

  /** The node's device files (`/dev` of its host): the simulated kernel creates one per loaded module. */
  deviceDir(node: string): string {
    return join(this.hostDir(node), 'dev');
  }

  /** The version of `module` loaded in the node's simulated kernel (its /sys/module/<m>/version), if loaded. */
  async loadedVersion(node: string, module = AGENT_DRIVER_MODULE): Promise<string | undefined> {
    return (await readTextIfExists(join(this.hostDir(node), 'sys', 'module', module, 'version')))?.trim();
  }

  /** Where a pod's container log is written (`<pod>.<container>.log`). */
  logDir(): string {
    return join(this.work, 'pods');
  }

  /** Every container log of the test's pods, for a failure message. */
  async logs(): Promise<string> {
    const names = await readdir(this.logDir()).catch(() => []);
    const parts = await Promise.all(names.sort().map(async (n) => `--- ${n}\n${(await readFile(join(this.logDir(), n), 'utf8')).slice(-4_000)}`));
    return parts.join('\n');
  }

  private hostDir(node: string): string {
    return join(this.work, 'nodes', node);
  }

  /** The node's simulated host, as the demo sets it up: 8 H100s, its own module tree, run dir and /dev. */
  private async hostEnv(node: string, second?: { readonly name: string; readonly loadsAfterWorldDriver?: boolean }): Promise<Record<string, string>> {
    const driver = second?.name;
    const host = this.hostDir(node);
    const sysfs = join(host, 'sys');
    await mkdir(join(host, 'run'), { recursive: true });
    await mkdir(this.deviceDir(node), { recursive: true });
    if (!(await pathExists(join(sysfs, 'bus')))) {
      await aGpuNode().writeTo(sysfs);
      await mkdir(join(sysfs, 'module'), { recursive: true });
    }
    return {
      SYSFS_ROOT: sysfs,
      MODULE_ROOT: join(host, driver === undefined ? 'root' : `root-${driver}`),
      ...(second?.loadsAfterWorldDriver === true ? { HOST_MODULE_ROOT: join(host, 'root') } : {}),
      MODPROBE_CONFIG_DIR: join(host, 'run', 'modprobe.d'),
      CACHE_DIR: this.#cacheDir,
      // The init container's pre-flight reads the node's loaded modules here.
      SYS_MODULE_ROOT: join(sysfs, 'module'),
      READY_FILE: join(host, 'run', driver === undefined ? '.driver-ready' : `.${driver}-driver-ready`),
      LOCK_PATH: join(host, 'run', driver === undefined ? 'agent.lock' : `${driver}-agent.lock`),
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      KERNEL_VERSION: this.kernel,
      HEADERS_DIRS: '/usr/src/linux-headers-{kernel}',
      SIMULATED_DEVICE_DIR: this.deviceDir(node),
      DEVICE_FILE_PREFIXES: `${this.deviceDir(node)}/`,
      LOG_LEVEL: 'info',
    };
  }
}
