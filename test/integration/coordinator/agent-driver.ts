/**
 * The real agent as a test's driver DaemonSet: the pod template runs `node agent/main.ts` and
 * the demo's process kubelet (demo/process-kubelet.ts) runs it as a local process for every
 * driver pod KWOK binds, with node-local paths pointing at a per-node directory (its simulated
 * host: GPUs in sysfs, module tree, simulated kernel state kept across pod restarts, as a real
 * kernel keeps its modules). The agent really compiles the sample driver with kbuild against
 * the installed headers; only the final module load goes to the simulated kernel.
 */
import type { V1DaemonSet, V1EnvVar } from '@kubernetes/client-node';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessKubelet } from '../../../demo/process-kubelet.ts';
import { aGpuNode } from '../../fixtures/sysfs/sysfs-tree.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { installedHeadersKernel } from '../../unit/agent/build/sample-driver.ts';
import { writeSampleDriverSource } from '../../unit/agent/agent-fixtures.ts';
import type { RolloutWorld } from './harness.ts';

export interface AgentDriverOptions {
  /** Extra environment for one node's agent, decided at each pod start (e.g. a node rebooted into a kernel without headers). */
  readonly nodeEnv?: (node: string) => Record<string, string>;
}

export class AgentDriver {
  readonly world: RolloutWorld;
  readonly work: string;
  readonly kernel = installedHeadersKernel();
  private kubelet: ProcessKubelet | undefined;
  private readonly options: AgentDriverOptions;

  private constructor(world: RolloutWorld, work: string, options: AgentDriverOptions) {
    this.world = world;
    this.work = work;
    this.options = options;
  }

  /** Starts the process kubelet for the world's driver pods; stopped (agents SIGTERMed) when the test ends. */
  static async start(world: RolloutWorld, options: AgentDriverOptions = {}): Promise<AgentDriver> {
    const driver = new AgentDriver(world, await mkdtemp(join(tmpdir(), `${world.id}-`)), options);
    const kubelet = new ProcessKubelet({
      kubeConfig: world.kc,
      kubeconfigPath: sharedCluster().kubeconfigPath,
      namespace: world.ns.name,
      labelSelector: 'app=driver',
      logDir: join(driver.work, 'pods'),
      nodeEnv: (node) => driver.hostEnv(node),
    });
    await kubelet.start();
    driver.kubelet = kubelet;
    world.onTearDown(async () => {
      await kubelet.stop();
      await rm(driver.work, { recursive: true, force: true });
    });
    return driver;
  }

  /** The sample driver's sources at `version` (a new version, a new srcversion). */
  async source(version: string): Promise<string> {
    return writeSampleDriverSource(join(this.work, 'src', version), version);
  }

  /** The DaemonSet (OnDelete, readiness gate on the agent's condition) running the agent at `version`. */
  daemonSet(version: string, sourceDir: string, extraEnv: Record<string, string> = {}): V1DaemonSet {
    const world = this.world;
    const field = (name: string, fieldPath: string): V1EnvVar => ({ name, valueFrom: { fieldRef: { fieldPath } } });
    const env: V1EnvVar[] = [
      field('NODE_NAME', 'spec.nodeName'),
      field('POD_NAME', 'metadata.name'),
      field('POD_NAMESPACE', 'metadata.namespace'),
      ...Object.entries({
        DRIVER_NAME: world.driver,
        KEY_DOMAIN: world.keys.domain,
        DEVICE_KIND: 'gpu',
        DRIVER_VERSION: version,
        DRIVER_SOURCE_DIR: sourceDir,
        DRIVER_MODULES: 'drsample_net',
        MODULE_PARAMETERS: '',
        MODULE_BLACKLIST: '',
        KERNEL_ADAPTER: 'simulated',
        ...extraEnv,
      }).map(([name, value]) => ({ name, value })),
    ];
    return world.daemonSetWith({
      terminationGracePeriodSeconds: 5,
      readinessGates: [{ conditionType: world.keys.driverReadyCondition }],
      containers: [{ name: 'agent', image: `driver-rollout/agent:${version}`, command: ['node', 'agent/main.ts'], env }],
    });
  }

  /** The node's simulated host, as the demo sets it up: 8 H100s, its own module tree and run dir. */
  private async hostEnv(node: string): Promise<Record<string, string>> {
    const host = join(this.work, 'nodes', node);
    const sysfs = join(host, 'sys');
    await mkdir(join(host, 'run'), { recursive: true });
    if (!(await exists(join(sysfs, 'bus')))) {
      await aGpuNode().writeTo(sysfs);
      await mkdir(join(sysfs, 'module'), { recursive: true });
    }
    return {
      SYSFS_ROOT: sysfs,
      SYS_MODULE_ROOT: join(sysfs, 'module'),
      MODULE_ROOT: join(host, 'root'),
      MODPROBE_CONFIG_DIR: join(host, 'run', 'modprobe.d'),
      CACHE_DIR: join(this.work, 'module-cache'),
      READY_FILE: join(host, 'run', '.driver-ready'),
      LOCK_PATH: join(host, 'run', 'agent.lock'),
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      KERNEL_VERSION: this.kernel,
      HEADERS_DIRS: '/usr/src/linux-headers-{kernel}',
      LOG_LEVEL: 'info',
      ...this.options.nodeEnv?.(node),
    };
  }

  /** Where a pod's container log is written (`<pod>.<container>.log`). */
  logDir(): string {
    return join(this.work, 'pods');
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
