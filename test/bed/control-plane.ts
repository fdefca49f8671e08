import { KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBinaries } from './ensure-binaries.ts';
import { createFakeNodes, type FakeNodeSpec } from './fake-nodes.ts';
import { freePort } from './free-port.ts';
import { generatePki, type Pki } from './generate-pki.ts';
import { DEFAULT_NODE_HEARTBEAT, KWOK_DEFAULT_LEASE_WORKERS, type NodeHeartbeat } from './node-heartbeat.ts';
import { startRealNode, type RealNode } from './real-node/start-real-node.ts';
import { reapStaleRuns, WORK_DIR_PREFIX } from './reap-stale-runs.ts';
import { logTail, startSupervised, type SupervisedProcess } from './supervised-process.ts';
import { waitUntil } from './wait-until.ts';

/**
 * `api`: etcd + kube-apiserver (no controllers: objects only change when a test changes them).
 * `full`: + kube-controller-manager, kube-scheduler and KWOK, which runs nodes annotated
 * `kwok.x-k8s.io/node=fake` and the pods scheduled onto them.
 * `real-node`: `full` + one real kubelet node running real containers (test/bed/real-node/).
 */
export type Profile = 'api' | 'full' | 'real-node';

export interface ControlPlane {
  readonly profile: Profile;
  readonly kubeconfigPath: string;
  readonly workDir: string;
  readonly binDir: string;
  readonly server: string;
  /** `real-node` only: the real kubelet node. */
  readonly realNode?: RealNode;
  /** Admin credentials (group system:masters). */
  kubeConfig(): KubeConfig;
  /** Stops kube-apiserver and starts it again on the same port; resolves when it is ready. */
  restartApiServer(): Promise<void>;
  /** Stops etcd and starts it again on the same ports and data; resolves when kube-apiserver is ready again. */
  restartEtcd(): Promise<void>;
  /** Kills every process of this control plane by PID and removes its work dir. */
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly profile: Profile;
  /** Raise client QPS of the controllers for scale runs. */
  readonly controllerQps?: number;
  /** `real-node` only: labels of the real node. */
  readonly realNodeLabels?: Readonly<Record<string, string>>;
  /** `full` only: KWOK nodes to create, with the labels the caller chooses; started once all are Ready. */
  readonly nodes?: readonly FakeNodeSpec[];
  /** `full` only: KWOK waits this long before a new pod runs (and, without readiness gates, turns Ready): a driver's reload time. */
  readonly podStartDelayMs?: number;
  /** More kube-apiserver flags (e.g. an audit policy for benchmarks). */
  readonly apiServerArgs?: readonly string[];
  /**
   * `full` only: KWOK's node Lease duration and the node lifecycle controller's grace period
   * (default DEFAULT_NODE_HEARTBEAT; nodeHeartbeatFor(nodes) for thousands of nodes on a small machine).
   */
  readonly nodeHeartbeat?: NodeHeartbeat;
  /** `full` only: KWOK's `nodeLeaseParallelism` (default KWOK's own, 4; kwokLeaseWorkers for thousands of nodes). */
  readonly kwokLeaseWorkers?: number;
}

const SERVICE_CIDR = '10.96.0.0/16';

export async function startControlPlane(options: StartOptions): Promise<ControlPlane> {
  await reapStaleRuns();
  const binDir = await ensureBinaries();
  const workDir = await mkdtemp(join(tmpdir(), WORK_DIR_PREFIX));
  await writeFile(join(workDir, 'owner'), String(process.pid));
  const processes: SupervisedProcess[] = [];
  let realNode: RealNode | undefined;
  const stop = async (): Promise<void> => {
    await realNode?.stop();
    for (const p of [...processes].reverse()) await p.stop();
    await rm(workDir, { recursive: true, force: true });
  };
  try {
    const pki = await generatePki(await mkdirp(join(workDir, 'pki')));
    const etcdPort = await freePort();
    const etcdPeerPort = await freePort();
    const apiPort = await freePort();
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfigPath = join(workDir, 'admin.kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml(server, pki));

    const etcdArgs = [
      '--name=default',
      `--data-dir=${join(workDir, 'etcd-data')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeerPort}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ];
    let etcd = startSupervised(workDir, 'etcd', join(binDir, 'etcd'), etcdArgs);
    processes.push(etcd);
    const etcdReady = async (): Promise<boolean> => (await fetch(`http://127.0.0.1:${etcdPort}/health`)).ok;
    await waitHealthy(etcd, etcdReady);

    const apiArgs = [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(workDir, 'apiserver-certs')}`,
      `--tls-cert-file=${pki.serverCert}`,
      `--tls-private-key-file=${pki.serverKey}`,
      `--client-ca-file=${pki.caCert}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.serviceAccountPub}`,
      `--service-account-signing-key-file=${pki.serviceAccountKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--authorization-mode=Node,RBAC',
      '--allow-privileged=true',
      '--profiling=false',
      '--v=0',
      ...(options.apiServerArgs ?? []),
    ];
    let apiserver = startSupervised(workDir, 'kube-apiserver', join(binDir, 'kube-apiserver'), apiArgs);
    processes.push(apiserver);
    const apiReady = async (): Promise<boolean> => (await httpsGet(`${server}/readyz`, pki)) === 200;
    await waitHealthy(apiserver, apiReady, 90_000);

    if (options.profile !== 'api') {
      const qps = String(options.controllerQps ?? 200);
      const heartbeat = options.nodeHeartbeat ?? DEFAULT_NODE_HEARTBEAT;
      processes.push(
        startSupervised(workDir, 'kube-controller-manager', join(binDir, 'kube-controller-manager'), [
          `--kubeconfig=${kubeconfigPath}`,
          '--leader-elect=false',
          '--bind-address=127.0.0.1',
          `--secure-port=${await freePort()}`,
          `--service-account-private-key-file=${pki.serviceAccountKey}`,
          `--root-ca-file=${pki.caCert}`,
          `--service-cluster-ip-range=${SERVICE_CIDR}`,
          '--allocate-node-cidrs=false',
          '--use-service-account-credentials=false',
          `--kube-api-qps=${qps}`,
          `--kube-api-burst=${String(Number(qps) * 2)}`,
          '--concurrent-daemonset-syncs=5',
          `--node-monitor-grace-period=${String(heartbeat.monitorGracePeriodSeconds)}s`,
          '--v=0',
        ]),
        startSupervised(workDir, 'kube-scheduler', join(binDir, 'kube-scheduler'), [
          `--kubeconfig=${kubeconfigPath}`,
          `--authentication-kubeconfig=${kubeconfigPath}`,
          `--authorization-kubeconfig=${kubeconfigPath}`,
          '--leader-elect=false',
          '--bind-address=127.0.0.1',
          `--secure-port=${await freePort()}`,
          `--kube-api-qps=${qps}`,
          `--kube-api-burst=${String(Number(qps) * 2)}`,
          '--v=0',
        ]),
        startSupervised(workDir, 'kwok', join(binDir, 'kwok'), [
          `--kubeconfig=${kubeconfigPath}`,
          '--manage-all-nodes=false',
          '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
          '--cidr=10.128.0.0/9',
          `--node-lease-duration-seconds=${String(heartbeat.leaseDurationSeconds)}`,
          `--server-address=127.0.0.1:${await freePort()}`,
          ...(await kwokStageFiles(binDir, workDir, options.podStartDelayMs ?? 0)).map((f) => `--config=${f}`),
          `--config=${await kwokOptionsFile(workDir, options.kwokLeaseWorkers ?? KWOK_DEFAULT_LEASE_WORKERS)}`,
        ]),
      );
      // The service-account controller creating `default` proves the controller manager runs.
      const kc = loadAdmin(kubeconfigPath);
      await waitUntil('kube-controller-manager to create the default service account', async () => {
        for (const p of processes) {
          if (!p.isRunning()) throw new Error(`${p.name} exited:\n${await logTail(p.logPath)}`);
        }
        const { CoreV1Api } = await import('@kubernetes/client-node');
        await kc.makeApiClient(CoreV1Api).readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
        return true;
      }, { timeoutMs: 60_000, intervalMs: 200 });
      if (options.nodes !== undefined && options.nodes.length > 0) await createFakeNodes(kc, options.nodes);
      if (options.profile === 'real-node') {
        realNode = await startRealNode({ workDir, server, pki, kubeConfig: kc }, undefined, options.realNodeLabels);
      }
    } else if (options.nodes !== undefined && options.nodes.length > 0) {
      throw new Error('fake nodes need the full profile (KWOK runs them)');
    }

    /** Stops a component and starts it again with the same arguments (ports, data dir); resolves once it is healthy. */
    const restart = async (old: SupervisedProcess, args: string[], ready: () => Promise<boolean>): Promise<SupervisedProcess> => {
      await old.stop();
      const fresh = startSupervised(workDir, old.name, join(binDir, old.name), args);
      processes.splice(processes.indexOf(old), 1, fresh);
      await waitHealthy(fresh, ready, 90_000);
      return fresh;
    };

    return {
      profile: options.profile,
      kubeconfigPath,
      workDir,
      binDir,
      server,
      ...(realNode === undefined ? {} : { realNode }),
      kubeConfig: () => loadAdmin(kubeconfigPath),
      restartApiServer: async () => {
        apiserver = await restart(apiserver, apiArgs, apiReady);
      },
      restartEtcd: async () => {
        etcd = await restart(etcd, etcdArgs, etcdReady);
        await waitHealthy(apiserver, apiReady, 90_000);
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A node annotated with this (any value) is one whose kubelet has stopped: KWOK's node-initialize
 * stage leaves it alone, so a Ready condition a test set to Unknown or False stays so (the stock
 * stage re-initializes any node whose Ready is not True, at its next change). KWOK still renews
 * its lease and runs its pods: only the node's Ready condition says the kubelet is gone.
 */
export const KUBELET_STOPPED_ANNOTATION = 'driver-rollout.test/kubelet-stopped';

/**
 * KWOK's stock node stages and pod deletion (from its module, cached beside the binary) plus our
 * pod stages; with a start delay, a copy of ours whose pod-running stage waits that long. The
 * node-initialize stage is a copy that skips nodes annotated KUBELET_STOPPED_ANNOTATION.
 */
async function kwokStageFiles(binDir: string, workDir: string, podStartDelayMs: number): Promise<string[]> {
  const stock = join(binDir, 'kwok-stages');
  const initialize = join(workDir, 'node-initialize.yaml');
  const selector = "  selector:\n    matchExpressions:\n    - key: '.status.conditions.[] | select( .type == \"Ready\" ) | .status'\n";
  const stockInitialize = await readFile(join(stock, 'node-initialize.yaml'), 'utf8');
  if (!stockInitialize.includes(selector)) throw new Error(`${join(stock, 'node-initialize.yaml')}: not the selector this copy extends`);
  const skipStopped = `  selector:\n    matchExpressions:\n    - key: '.metadata.annotations["${KUBELET_STOPPED_ANNOTATION}"]'\n      operator: 'DoesNotExist'\n`;
  await writeFile(initialize, stockInitialize.replace('  selector:\n    matchExpressions:\n', skipStopped));
  const ours = join(import.meta.dirname, 'kwok-pod-stages.yaml');
  let podStages = ours;
  if (podStartDelayMs > 0) {
    const running = 'metadata:\n  name: driver-rollout-pod-running\nspec:\n';
    const text = await readFile(ours, 'utf8');
    if (!text.includes(running)) throw new Error(`${ours}: no pod-running stage to delay`);
    podStages = join(workDir, 'kwok-pod-stages-delayed.yaml');
    await writeFile(podStages, text.replace(running, `${running}  delay:\n    durationMilliseconds: ${Math.round(podStartDelayMs)}\n`));
  }
  return [initialize, join(stock, 'node-heartbeat-with-lease.yaml'), join(stock, 'pod-delete.yaml'), podStages];
}

/**
 * A KwokConfiguration with the options no flag of KWOK's sets. KWOK does not default the options
 * of a configuration it is given (its stage workers would be 0 and it would refuse to start), so
 * the stage workers are written out at KWOK's own defaults.
 */
async function kwokOptionsFile(workDir: string, leaseWorkers: number): Promise<string> {
  const path = join(workDir, 'kwok-options.yaml');
  const options = { nodeLeaseParallelism: leaseWorkers, nodePlayStageParallelism: KWOK_DEFAULT_STAGE_WORKERS, podPlayStageParallelism: KWOK_DEFAULT_STAGE_WORKERS };
  await writeFile(path, `apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n${Object.entries(options).map(([k, v]) => `  ${k}: ${String(v)}\n`).join('')}`);
  return path;
}

/** KWOK's default for `nodePlayStageParallelism` and `podPlayStageParallelism`. */
const KWOK_DEFAULT_STAGE_WORKERS = 4;

function loadAdmin(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

async function mkdirp(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  return dir;
}

async function waitHealthy(p: SupervisedProcess, healthy: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  await waitUntil(`${p.name} to become healthy`, async () => {
    if (!p.isRunning()) throw new Error(`${p.name} exited:\n${await logTail(p.logPath)}`);
    return (await healthy()) ? true : undefined;
  }, { timeoutMs, intervalMs: 100 }).catch(async (error: unknown) => {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n--- ${p.logPath}\n${await logTail(p.logPath)}`, { cause: error });
  });
}

async function httpsGet(url: string, pki: Pki): Promise<number> {
  return await new Promise((resolve, reject) => {
    const req = request(url, {
      ca: readFileSync(pki.caCert),
      cert: readFileSync(pki.adminCert),
      key: readFileSync(pki.adminKey),
      timeout: 2_000,
    }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function kubeconfigYaml(server: string, pki: Pki): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: test-bed
  cluster:
    server: ${server}
    certificate-authority: ${pki.caCert}
users:
- name: admin
  user:
    client-certificate: ${pki.adminCert}
    client-key: ${pki.adminKey}
contexts:
- name: test-bed
  context:
    cluster: test-bed
    user: admin
    namespace: default
current-context: test-bed
`;
}
