import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { execFile, spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { runCachedBuild } from '../ensure-binaries.ts';
import { freePort } from '../free-port.ts';
import { issueCertificate, type Pki } from '../generate-pki.ts';
import { logTail, startSupervised, type SupervisedProcess } from '../supervised-process.ts';
import { waitUntil } from '../wait-until.ts';
import { containerdConfig, parsePodNetwork, podNetworkCni, type PodNetwork } from './containerd-config.ts';
import { kubeletConfig } from './kubelet-config.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

const run = promisify(execFile);
const HOST_SCRIPT = join(import.meta.dirname, 'host.sh');
const REPO = resolve(import.meta.dirname, '../../..');
/** Debian's packages (scripts/ensure-real-node-packages.sh). */
const CONTAINERD = '/usr/bin/containerd';
const CTR = '/usr/bin/ctr';
const RUNC = '/usr/sbin/runc';
const CNI_BIN_DIR = '/usr/lib/cni';
/** A name in the API server's certificate (test/bed/generate-pki.ts) that pods map to the proxy. */
const POD_API_HOST = 'kubernetes.default.svc';

/** The images the real node has, as `ctr` names them (test/images/build-images.sh). */
export interface NodeImages {
  readonly agent: string;
  readonly init: string;
  readonly pause: string;
}

export interface RealNode {
  readonly name: string;
  /** The node's work dir (inside the control plane's): roots, logs, and the agent's host paths. */
  readonly dir: string;
  readonly images: NodeImages;
  /** The image tarballs it was given (test/images/build-images.sh's output). */
  readonly imagesDir: string;
  /**
   * Where pods outside the host's network reach the API server: `host` resolves to nothing by
   * itself (give the pod a hostAlias to `ip`); it is a name the serving certificate carries.
   */
  readonly podApi: { readonly host: string; readonly ip: string; readonly port: number };
  readonly podNetwork: PodNetwork;
  /** Kills everything the node runs and undoes its host effects (host.sh teardown). */
  stop(): Promise<void>;
}

export interface ControlPlaneAccess {
  readonly workDir: string;
  readonly server: string;
  readonly pki: Pick<Pki, 'caCert' | 'caKey'>;
  readonly kubeConfig: KubeConfig;
}

/**
 * One real kubelet node (kubelet v1.36 from Go modules, Debian's containerd 1.6 and runc) joined
 * to a running control plane, with the project's images imported into its containerd. Its
 * host effects are made and undone by host.sh: a cgroup of its own, the sysctls the kubelet
 * rewrites (restored by the last node out), the runtime's hard-coded directories; a guard
 * process undoes them when this process dies, and the control plane's stale-run reaper runs
 * `<workDir>/teardown.sh` as a backstop. See test/real-node/README.md.
 */
/**
 * Imports docker-archive tarballs (the driver images of test/images/build-driver-images.sh) into a
 * running real node's containerd, as `ctr images import` loads what a registry would serve.
 */
export async function importImageArchives(nodeDir: string, archives: readonly string[]): Promise<void> {
  const socket = join(nodeDir, 'containerd', 'containerd.sock');
  for (const archive of archives) await run(CTR, ['--address', socket, '--namespace', 'k8s.io', 'images', 'import', archive]);
}

export async function startRealNode(plane: ControlPlaneAccess, name = 'real-node-1', labels: Readonly<Record<string, string>> = {}): Promise<RealNode> {
  const [kubeletDir, imagesDir] = await Promise.all([
    runCachedBuild(join(REPO, 'test/bed/build-kubelet.sh')),
    runCachedBuild(join(REPO, 'test/images/build-images.sh')),
  ]);
  const images = parseImages(await readFile(join(imagesDir, 'images.env'), 'utf8'));
  const dir = join(plane.workDir, 'node');
  const id = basename(plane.workDir);
  let proxy: TcpProxy | undefined;
  const stop = async (): Promise<void> => {
    await proxy?.close();
    await run('bash', [HOST_SCRIPT, 'teardown', dir, id]);
  };
  await mkdir(join(dir, 'cni', 'net.d'), { recursive: true });
  await writeFile(join(plane.workDir, 'teardown.sh'), `exec bash ${HOST_SCRIPT} teardown ${dir} ${id}\n`);
  await run('bash', [HOST_SCRIPT, 'setup', dir, id]);
  spawn('bash', [HOST_SCRIPT, 'guard', String(process.pid), dir, id], { detached: true, stdio: 'ignore' }).unref();
  try {
    const socket = join(dir, 'containerd', 'containerd.sock');
    await writeFile(join(dir, 'containerd.toml'), containerdConfig({ dir, runc: RUNC, cniBinDir: CNI_BIN_DIR, sandboxImage: images.pause }));
    const podNetwork = parsePodNetwork(await readFile(join(dir, 'pod-network.env'), 'utf8'));
    await writeFile(join(dir, 'cni', 'net.d', '10-pods.conflist'), podNetworkCni(podNetwork, join(dir, 'cni', 'ipam')));
    const api = new URL(plane.server);
    proxy = await startTcpProxy(podNetwork.gateway, { host: api.hostname, port: Number(api.port) });
    const containerd = startSupervised(plane.workDir, 'containerd', CONTAINERD, ['--config', join(dir, 'containerd.toml')]);
    await writeFile(join(dir, 'containerd.pgid'), String(containerd.pid));
    const ctr = async (...args: string[]): Promise<string> => (await run(CTR, ['--address', socket, '--namespace', 'k8s.io', ...args])).stdout;
    await waitFor(containerd, 'containerd to serve its socket', async () => ((await ctr('version')).includes('Server') ? true : undefined));
    await Promise.all(['pause', 'init-container', 'agent'].map(async (image) => await ctr('images', 'import', join(imagesDir, `${image}.tar`))));

    const node = await issueCertificate(plane.pki, await mkdirp(join(dir, 'pki')), 'node', `/O=system:nodes/CN=system:node:${name}`);
    await writeFile(join(dir, 'node.kubeconfig'), nodeKubeconfig(plane.server, plane.pki.caCert, node));
    await writeFile(join(dir, 'kubelet.yaml'), kubeletConfig({
      dir,
      cgroupRoot: `/drtest-${id}`,
      containerdSocket: socket,
      clientCaFile: plane.pki.caCert,
      port: await freePort(),
      healthzPort: await freePort(),
    }));
    const kubelet = startSupervised(plane.workDir, 'kubelet', join(kubeletDir, 'kubelet'), [
      `--config=${join(dir, 'kubelet.yaml')}`,
      `--kubeconfig=${join(dir, 'node.kubeconfig')}`,
      `--root-dir=${join(dir, 'kubelet')}`,
      `--cert-dir=${join(dir, 'pki', 'serving')}`,
      `--hostname-override=${name}`,
      // Refused as an address (loopback), so the node has none; it keeps the kubelet off other interfaces.
      '--node-ip=127.0.0.1',
      ...(Object.keys(labels).length > 0 ? [`--node-labels=${Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(',')}`] : []),
      '--v=1',
    ]);
    await writeFile(join(dir, 'kubelet.pgid'), String(kubelet.pid));
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    await waitFor(kubelet, `node ${name} to become Ready`, async () => {
      const n = await core.readNode({ name });
      return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? true : undefined;
    }, 180_000);
    return {
      name,
      dir,
      images,
      imagesDir,
      podApi: { host: POD_API_HOST, ip: podNetwork.gateway, port: proxy.port },
      podNetwork,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

function parseImages(env: string): NodeImages {
  const values = Object.fromEntries(env.trim().split('\n').map((l) => l.split('=', 2) as [string, string]));
  const { agent, init, pause } = values;
  if (agent === undefined || init === undefined || pause === undefined) throw new Error(`images.env lacks an image: ${env}`);
  return { agent, init, pause };
}

async function waitFor(p: SupervisedProcess, what: string, check: () => Promise<true | undefined>, timeoutMs = 60_000): Promise<void> {
  await waitUntil(what, async () => {
    if (!p.isRunning()) throw new Error(`${p.name} exited:\n${await logTail(p.logPath)}`);
    return await check();
  }, { timeoutMs, intervalMs: 250 }).catch(async (error: unknown) => {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n--- ${p.logPath}\n${await logTail(p.logPath)}`, { cause: error });
  });
}

async function mkdirp(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  return dir;
}

function nodeKubeconfig(server: string, caCert: string, cred: { cert: string; key: string }): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: test-bed
  cluster: {server: ${server}, certificate-authority: ${caCert}}
users:
- name: node
  user: {client-certificate: ${cred.cert}, client-key: ${cred.key}}
contexts:
- name: node
  context: {cluster: test-bed, user: node}
current-context: node
`;
}
