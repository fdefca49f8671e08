import { join } from 'node:path';

export interface ContainerdPaths {
  /** The node's work dir: every path containerd writes to is under it. */
  readonly dir: string;
  readonly runc: string;
  readonly cniBinDir: string;
  readonly sandboxImage: string;
}

/**
 * Debian's containerd 1.6 (config version 2) for one test-bed node: root, state, sockets, the
 * runc root and CNI config all under the work dir; the CRI plugin restricted to what this
 * machine allows (no CAP_SYS_RESOURCE: restrict_oom_score_adj; no AppArmor); the stream server
 * on a port the OS picks; the sandbox image imported locally, never pulled.
 */
export function containerdConfig(p: ContainerdPaths): string {
  const d = (...parts: string[]): string => JSON.stringify(join(p.dir, ...parts));
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return `version = 2
root = ${d('containerd', 'root')}
state = ${d('containerd', 'state')}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = ${d('containerd', 'containerd.sock')}

[ttrpc]
  address = ${d('containerd', 'containerd.sock.ttrpc')}

[plugins."io.containerd.internal.v1.opt"]
  path = ${d('containerd', 'opt')}

[${cri}]
  sandbox_image = ${JSON.stringify(p.sandboxImage)}
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [${cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [${cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [${cri}.containerd.runtimes.runc.options]
        BinaryName = ${JSON.stringify(p.runc)}
        Root = ${d('runc')}
        SystemdCgroup = false
  [${cri}.cni]
    bin_dir = ${JSON.stringify(p.cniBinDir)}
    conf_dir = ${d('cni', 'net.d')}
`;
}

/** Only loopback: the node goes Ready with a CNI config, and its pods use the host's network. */
export const LOOPBACK_CNI = `${JSON.stringify({ cniVersion: '1.0.0', name: 'drtest-loopback', plugins: [{ type: 'loopback' }] }, null, 2)}\n`;

/** The node's pod network as host.sh setup made it (`<node dir>/pod-network.env`). */
export interface PodNetwork {
  readonly bridge: string;
  /** A /24 no other interface on the machine has. */
  readonly subnet: string;
  /** The subnet's .1, on the bridge: the host as the pods reach it, on-link. */
  readonly gateway: string;
}

/**
 * Pods that do not use the host's network get an address on the node's bridge (Debian's CNI
 * `bridge` and `host-local` plugins, leases under `ipamDir`): the bridge exists already and holds
 * the gateway address, so the plugin adds no address, route, NAT rule or forwarding of its own.
 * Host-network pods are not affected.
 */
export function podNetworkCni(net: PodNetwork, ipamDir: string): string {
  return `${JSON.stringify({
    cniVersion: '1.0.0',
    name: 'drtest-pods',
    plugins: [
      { type: 'bridge', bridge: net.bridge, isGateway: false, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: net.subnet, gateway: net.gateway }]], dataDir: ipamDir } },
      { type: 'loopback' },
    ],
  }, null, 2)}\n`;
}

/** Reads `pod-network.env` (BRIDGE=, SUBNET=, GATEWAY=). */
export function parsePodNetwork(env: string): PodNetwork {
  const values = Object.fromEntries(env.trim().split('\n').map((l) => l.split('=', 2) as [string, string]));
  const { BRIDGE: bridge, SUBNET: subnet, GATEWAY: gateway } = values;
  if (bridge === undefined || subnet === undefined || gateway === undefined) throw new Error(`pod-network.env lacks a value: ${env}`);
  return { bridge, subnet, gateway };
}
