import type { KubernetesObject, V1Container, V1DaemonSet, V1Deployment, V1PodSpec, V1Probe } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

const MANIFESTS = resolve(import.meta.dirname, '../../manifests');
/** The install namespace the shipped manifests name (driver-rbac.yaml, driver-daemonset.yaml). */
export const INSTALL_NAMESPACE = 'driver-rollout';
const FILES = ['driverrollout-crd.yaml', 'driver-rbac.yaml', 'safe-load-policy.yaml', 'coordinator.yaml', 'driver-daemonset.yaml'];
const CLUSTER_SCOPED = new Set(['CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'Namespace']);

/** The objects a user installs, as shipped (manifests/), in apply order; namespaced ones without a namespace go to the install namespace. */
export async function shippedObjects(): Promise<KubernetesObject[]> {
  const objects: KubernetesObject[] = [];
  for (const file of FILES) {
    for (const doc of parseAllDocuments(await readFile(join(MANIFESTS, file), 'utf8'))) {
      const o = doc.toJS() as KubernetesObject | null;
      if (o === null) continue;
      if (!CLUSTER_SCOPED.has(o.kind ?? '')) o.metadata = Object.assign(o.metadata ?? {}, { namespace: o.metadata?.namespace ?? INSTALL_NAMESPACE });
      objects.push(o);
    }
  }
  return objects;
}

/** Where this test bed's one real node differs from a cluster node (test/real-node/README.md). */
export interface RealNodeSite {
  /** The API server listens on 127.0.0.1 only and there is no kube-proxy: pods use the host's network and this port. */
  readonly apiPort: number;
  /** Label selecting the real node (never the KWOK nodes, which run no containers). */
  readonly nodeSelector: Readonly<Record<string, string>>;
  /** The node's work dir: the agent's writable host paths go under `<hostDir>/host/`. */
  readonly hostDir: string;
  /** A free port on the machine for the agent's HTTP server (host network). */
  readonly agentPorts: Readonly<Record<string, number>>;
  /**
   * Where pods on the node's bridge reach the API server (test/bed/real-node/tcp-proxy.ts): `host`
   * is a name in its certificate, mapped to `ip` by a hostAlias.
   */
  readonly podApi: { readonly host: string; readonly ip: string; readonly port: number };
  /** Labels that keep a pod out of each driver's drain (the coordinator's own pod: see the README). */
  readonly drainSkipLabels: readonly string[];
}

/**
 * The shipped objects with only what this machine requires changed, nothing else:
 * - driver DaemonSet: host network, KUBERNETES_SERVICE_HOST/PORT to the loopback API server,
 *   probes on 127.0.0.1, its HTTP port a free one, scheduled to the real node only; its writable
 *   host paths (/run/driver-rollout, /run/modprobe.d, the module cache) moved under the node's
 *   work dir, /sys and /lib/modules read-only;
 * - coordinator Deployment: its pods on the node's pod network as shipped (each replica its own
 *   address, so both listen on the shipped port; probes on the pod's address), scheduled to the
 *   real node, which the drain skips (it runs on the node it drains); the API server through the
 *   node's proxy: KUBERNETES_SERVICE_HOST/PORT and a hostAlias.
 */
export function adaptToRealNode(objects: readonly KubernetesObject[], site: RealNodeSite): KubernetesObject[] {
  return objects.map((original) => {
    const o = structuredClone(original);
    if (o.kind === 'DaemonSet') adaptDaemonSet(o, site);
    if (o.kind === 'Deployment') adaptDeployment(o, site);
    return o;
  });
}

function adaptHostNetworkPod(spec: V1PodSpec, site: RealNodeSite, port: number): void {
  spec.hostNetwork = true;
  spec.nodeSelector = { ...spec.nodeSelector, ...site.nodeSelector };
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    setApiServer(c, '127.0.0.1', site.apiPort);
    for (const p of c.ports ?? []) p.containerPort = port;
    for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) loopbackProbe(probe);
  }
}

function setApiServer(c: V1Container, host: string, port: number): void {
  c.env = [
    ...(c.env ?? []).filter((e) => !['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT'].includes(e.name)),
    { name: 'KUBERNETES_SERVICE_HOST', value: host },
    { name: 'KUBERNETES_SERVICE_PORT', value: String(port) },
  ];
}

function loopbackProbe(probe: V1Probe | undefined): void {
  if (probe?.httpGet !== undefined) probe.httpGet.host = '127.0.0.1';
}

/**
 * The agent's writable host paths in the shipped manifests, moved under the node's work dir (a
 * shared mount, test/bed/real-node/host.sh): /run/nvidia is where the NVIDIA presets publish
 * their driver root (Bidirectional).
 */
const WRITABLE_HOST_PATHS = new Set(['/run/driver-rollout', '/run/modprobe.d', '/run/nvidia', '/var/lib/driver-rollout/cache', '/var/lib/driver-rollout/gpu/firmware']);

/** Each driver's agent listens on the host network: each DaemonSet needs a port of its own. */
function agentPort(ds: V1DaemonSet, site: RealNodeSite): number {
  const port = site.agentPorts[ds.metadata?.name ?? ''];
  if (port === undefined) throw new Error(`no agent port for DaemonSet ${ds.metadata?.name ?? ''}: each driver's agent needs its own on the host network`);
  return port;
}

function adaptDaemonSet(ds: V1DaemonSet, site: RealNodeSite): void {
  const spec = ds.spec?.template.spec;
  if (spec === undefined) throw new Error(`DaemonSet ${ds.metadata?.name ?? ''} has no pod spec`);
  const port = agentPort(ds, site);
  adaptHostNetworkPod(spec, site, port);
  const agent = container(spec.containers, 'agent');
  setEnv(agent, 'HTTP_PORT', String(port));
  for (const v of spec.volumes ?? []) {
    const path = v.hostPath?.path;
    // A writable path or one under it (the NIC preset's driver root parent, /run/driver-rollout/<name>).
    if (path !== undefined && [...WRITABLE_HOST_PATHS].some((w) => path === w || path.startsWith(`${w}/`))) v.hostPath = { path: join(site.hostDir, 'host', path), type: 'DirectoryOrCreate' };
  }
  const readOnly = new Set((spec.volumes ?? []).filter((v) => v.hostPath?.path === '/sys' || v.hostPath?.path === '/lib/modules').map((v) => v.name));
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    for (const m of c.volumeMounts ?? []) if (readOnly.has(m.name)) m.readOnly = true;
  }
}

function adaptDeployment(d: V1Deployment, site: RealNodeSite): void {
  const template = d.spec?.template;
  if (d.spec === undefined || template?.spec === undefined) throw new Error(`Deployment ${d.metadata?.name ?? ''} has no pod spec`);
  template.metadata = Object.assign(template.metadata ?? {}, { labels: Object.assign(template.metadata?.labels ?? {}, Object.fromEntries(site.drainSkipLabels.map((label) => [label, 'true']))) });
  const spec = template.spec;
  spec.nodeSelector = { ...spec.nodeSelector, ...site.nodeSelector };
  spec.hostAliases = [...(spec.hostAliases ?? []), { ip: site.podApi.ip, hostnames: [site.podApi.host] }];
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) setApiServer(c, site.podApi.host, site.podApi.port);
}

function container(containers: V1Container[], name: string): V1Container {
  const c = containers.find((x) => x.name === name);
  if (c === undefined) throw new Error(`no container ${name}`);
  return c;
}

function setEnv(c: V1Container, name: string, value: string): void {
  c.env = [...(c.env ?? []).filter((e) => e.name !== name), { name, value }];
}
