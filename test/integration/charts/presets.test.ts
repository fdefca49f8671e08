import type { KubernetesObject, V1ConfigMap, V1Container, V1DaemonSet } from '@kubernetes/client-node';
import { loadAllYaml } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../agent/config/parse-agent-config.ts';
import { servesNvidiaGpus } from '../../../agent/detect/device-selector.ts';
import { moduleConfigSha256 } from '../../../agent/kernel/module-config-sha256.ts';
import { templateDriverFingerprint } from '../../../coordinator/cluster/template-driver-fingerprint.ts';
import { imageReference } from '../../../drivers/build-driver-images.ts';
import { DRIVER_FLAVOURS } from '../../../drivers/flavours.ts';
import { ensureHelm } from '../../bed/ensure-helm.ts';

/*
 * The chart's drivers[] presets (templates/_presets.tpl), rendered with helm as a user installs
 * them: each names the image drivers/build-driver-images.ts builds for it, with the settings the
 * agent needs; kernel flavours, GPU families, module config and the values the chart refuses.
 */

const run = promisify(execFile);
const CHART = resolve(import.meta.dirname, '../../../charts/driver-rollout');
let helm = '';
beforeAll(async () => {
  helm = await ensureHelm();
});

type Driver = Record<string, unknown> & { name: string };

async function render(drivers: readonly Driver[], more: Record<string, unknown> = {}): Promise<KubernetesObject[]> {
  const dir = await mkdtemp(join(tmpdir(), 'presets-'));
  try {
    await writeFile(join(dir, 'values.yaml'), stringify({ drivers: drivers.map((d) => ({ enabled: true, ...d })), ...more }));
    const { stdout } = await run(helm, ['template', 'driver-rollout', CHART, '--namespace', 'driver-rollout', '-f', join(dir, 'values.yaml')], { maxBuffer: 16 * 1024 * 1024 });
    return (loadAllYaml(stdout) as (KubernetesObject | null)[]).filter((d): d is KubernetesObject => d !== null);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function renderError(drivers: readonly Driver[]): Promise<string> {
  const error = await render(drivers).then(() => undefined, (e: unknown) => e as { stderr?: string });
  if (error === undefined) throw new Error('helm template succeeded; expected it to refuse the values');
  return error.stderr ?? '';
}

const daemonSets = (objects: readonly KubernetesObject[]): V1DaemonSet[] => objects.filter((o): o is V1DaemonSet => o.kind === 'DaemonSet');
const agentOf = (ds: V1DaemonSet | undefined): V1Container | undefined => ds?.spec?.template.spec?.containers.find((c) => c.name === 'agent');
const envOf = (ds: V1DaemonSet | undefined): Record<string, string> => Object.fromEntries((agentOf(ds)?.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value ?? '']));

describe('the chart presets', () => {
  it.each(DRIVER_FLAVOURS.map((f) => [f.name, f] as const))('%s names its driver image and the settings that load it', async (_name, flavour) => {
    const [ds] = daemonSets(await render([{ name: 'drv', preset: flavour.name }]));
    expect(agentOf(ds)?.image).toBe(imageReference('', flavour));
    const env = envOf(ds);
    expect(env).toMatchObject({
      DRIVER_VERSION: flavour.driverVersion,
      DRIVER_SOURCE_DIR: '/opt/driver-src',
      BUILD_RECIPE: JSON.stringify({ kind: 'dkms', packages: [{ directory: flavour.dkmsDirectory }] }),
    });
    if (flavour.prebuiltKernels.length > 0) expect(env['PREBUILT_MODULES_DIR']).toBe('/opt/lib/modules');
    if (flavour.firmwarePackage !== undefined) {
      expect(env).toMatchObject({ FIRMWARE_DIR: '/opt/driver-firmware', FIRMWARE_HOST_DIR: '/var/lib/driver-rollout/drv/firmware', HOST_FIRMWARE_ROOTS: '/host/lib/firmware', LOAD_PLAN: 'nvidia' });
      expect(env).toMatchObject({ MODULE_BLACKLIST: 'nouveau', HOST_BLACKLIST_DIR: '/host/etc/modprobe.d' });
      // The firmware host dir is mounted at its own path: the kernel resolves it in the host's namespace.
      expect(agentOf(ds)?.volumeMounts?.find((m) => m.mountPath === '/var/lib/driver-rollout/drv/firmware')).toBeDefined();
    } else {
      expect(env['HOST_BLACKLIST_DIR']).toBeUndefined();
    }
    // The driver root: the image's user space, published where NVIDIA's operands look (NVIDIA) or beside the driver's own run dir.
    const rootPath = flavour.userSpacePackages.length > 0 ? '/run/nvidia/driver' : '/run/driver-rollout/drv/driver';
    expect(env).toMatchObject({ DRIVER_ROOT_DIR: '/opt/driver-root', DRIVER_ROOT_PATH: rootPath });
    expect(env['DRIVER_ROOT_CHECK']).toBe(flavour.userSpacePackages.length > 0 ? 'nvidia-smi' : undefined);
    // For a GPU driver the same root is what the version guard checks and nvidia-persistenced runs from:
    // on in the NVIDIA presets, whose images carry both; the NIC's root (the C library only) is published only.
    const config = parseAgentConfig([], { ...env, NODE_NAME: 'n1', POD_NAME: 'drv-x', POD_NAMESPACE: 'driver-rollout' });
    expect(config.driverRootDir).toBe('/opt/driver-root');
    expect(servesNvidiaGpus(config.deviceSelector)).toBe(flavour.daemonPackages.length > 0);
    // Its bind mount must reach the host and outlive the pod.
    expect(agentOf(ds)?.volumeMounts?.find((m) => m.name === 'driver-root-parent')).toMatchObject({ mountPath: dirname(rootPath), mountPropagation: 'Bidirectional' });
    // Every module the preset loads is one the flavour builds.
    for (const module of (env['DRIVER_MODULES'] ?? '').split(' ')) expect(flavour.modules).toContain(module);
  });

  it('gives each driver the upgrade policy of the operator it comes from: the GPU Operator\'s for nvidia, the Network Operator\'s for the NIC', async () => {
    const objects = await render([{ name: 'gpu', preset: 'nvidia' }, { name: 'nic', preset: 'dkms-nic', upgradePolicy: { maxParallelUpgrades: 2 } }]);
    const policies = Object.fromEntries(objects.filter((o) => o.kind === 'DriverRollout').map((o) => [(o as unknown as { spec: { driverName: string } }).spec.driverName, (o as unknown as { spec: { upgradePolicy: unknown } }).spec.upgradePolicy]));
    expect(policies['gpu']).toMatchObject({ podDeletion: { resourcePrefixes: ['nvidia.com/gpu', 'nvidia.com/mig-'] }, drain: { enable: false } });
    // A field the entry sets replaces the preset's; the rest stays.
    expect(policies['nic']).toMatchObject({ maxParallelUpgrades: 2, podDeletion: { enable: false }, drain: { enable: true, deleteEmptyDir: true } });
  });

  it('lets an entry turn off what its preset turns on: false replaces true', async () => {
    const objects = await render([{ name: 'gpu', preset: 'nvidia', blacklistOnHost: false, upgradePolicy: { podDeletion: { enable: false }, drain: { enable: true } } }]);
    expect(envOf(daemonSets(objects)[0])['HOST_BLACKLIST_DIR']).toBeUndefined();
    const rollout = objects.find((o) => o.kind === 'DriverRollout') as unknown as { spec: { upgradePolicy: unknown } };
    expect(rollout.spec.upgradePolicy).toMatchObject({ podDeletion: { enable: false, resourcePrefixes: ['nvidia.com/gpu', 'nvidia.com/mig-'] }, drain: { enable: true } });
  });

  it('runs a kernel flavour in a DaemonSet of its own, by NFD\'s kernel label, both under one DriverRollout', async () => {
    const objects = await render([{ name: 'gpu', preset: 'nvidia', kernelFlavours: [{ preset: 'nvidia-open', kernels: ['6.1.0-50-amd64'] }] }]);
    const [own, open] = daemonSets(objects);
    const kernelRule = (ds: V1DaemonSet | undefined): unknown => ds?.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]?.matchExpressions;
    expect(own?.metadata?.name).toBe('driver-rollout-gpu');
    expect(kernelRule(own)).toEqual([{ key: 'feature.node.kubernetes.io/kernel-version.full', operator: 'NotIn', values: ['6.1.0-50-amd64'] }]);
    expect(open?.metadata?.name).toBe('driver-rollout-gpu-nvidia-open');
    expect(kernelRule(open)).toEqual([{ key: 'feature.node.kubernetes.io/kernel-version.full', operator: 'In', values: ['6.1.0-50-amd64'] }]);
    expect(envOf(open)['DRIVER_VERSION']).toBe('535.261.03');
    expect(envOf(own)['DRIVER_VERSION']).toBe('535.309.01');
    const rollouts = objects.filter((o) => o.kind === 'DriverRollout') as unknown as { spec: { selector: unknown } }[];
    expect(rollouts).toHaveLength(1);
    expect(rollouts[0]?.spec.selector).toEqual({
      matchLabels: { 'app.kubernetes.io/instance': 'driver-rollout' },
      matchExpressions: [{ key: 'app.kubernetes.io/name', operator: 'In', values: ['driver-rollout-gpu', 'driver-rollout-gpu-nvidia-open'] }],
    });
  });

  it('puts the module config in a ConfigMap and its checksum, as the agent computes it, into the pod template: an edit is a new driver identity', async () => {
    const config = { 'nvidia.conf': 'NVreg_EnableGpuFirmware=1\n', 'nvidia-uvm.conf': 'uvm_perf_prefetch_enable=0' };
    const objects = await render([{ name: 'gpu', preset: 'nvidia', moduleConfig: config }]);
    const map = objects.find((o): o is V1ConfigMap => o.kind === 'ConfigMap' && o.metadata?.name === 'driver-rollout-gpu-module-config');
    expect(map?.data).toEqual(config);
    const [ds] = daemonSets(objects);
    expect(envOf(ds)).toMatchObject({
      MODULE_CONFIG_DIR: '/etc/driver-rollout/module-config',
      MODULE_CONFIG_SHA256: moduleConfigSha256(Object.entries(config).map(([name, content]) => ({ name, content }))),
    });
    const [edited] = daemonSets(await render([{ name: 'gpu', preset: 'nvidia', moduleConfig: { ...config, 'nvidia.conf': 'NVreg_EnableGpuFirmware=0\n' } }]));
    const fingerprint = (d: V1DaemonSet | undefined): string | null => templateDriverFingerprint(d?.spec?.template);
    expect(fingerprint(ds)).not.toBeNull();
    expect(fingerprint(edited)).not.toBe(fingerprint(ds));
  });

  it('limits a GPU driver to the GPU families it is for, by GFD\'s label', async () => {
    const [ds] = daemonSets(await render([{ name: 'gpu', preset: 'nvidia-open', gpuFamilies: ['hopper', 'ampere'] }]));
    expect(ds?.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]?.matchExpressions).toEqual([
      { key: 'nvidia.com/gpu.family', operator: 'In', values: ['hopper', 'ampere'] },
    ]);
  });

  it.each([
    ['a GPU family the preset does not support', { name: 'gpu', preset: 'nvidia', gpuFamilies: ['blackwell'] }, 'drivers[gpu].gpuFamilies: blackwell GPUs are not supported by preset "nvidia"'],
    ['an older GPU than the open modules drive', { name: 'gpu', preset: 'nvidia-open', gpuFamilies: ['pascal'] }, 'drivers[gpu].gpuFamilies: pascal GPUs are not supported by preset "nvidia-open"'],
    ['a Blackwell node selected by GFD\'s label', { name: 'gpu', preset: 'nvidia', nodeSelector: { 'nvidia.com/gpu.family': 'blackwell' } }, 'blackwell GPUs are not supported'],
    ['GPU families on a NIC preset', { name: 'nic', preset: 'dkms-nic', gpuFamilies: ['hopper'] }, 'drivers[nic].gpuFamilies: preset "dkms-nic" knows no GPU families'],
    ['a custom driver without an image', { name: 'x', preset: 'custom', version: '1', modules: ['x'], source: { dir: '/opt/driver-src' } }, 'drivers[x].image: required with preset "custom"'],
    ['a custom driver without modules', { name: 'x', preset: 'custom', image: { repository: 'r/x', tag: '1' }, version: '1', source: { dir: '/opt/driver-src' } }, 'drivers[x].modules: required with preset "custom"'],
    ['sources in the image and from a URL', { name: 'gpu', preset: 'nvidia', source: { url: 'https://example.invalid/x.tgz', sha256: 'a'.repeat(64) } }, 'drivers[gpu].source: set dir or url, not both'],
    ['a driver that blacklists its own module', { name: 'gpu', preset: 'nvidia', moduleBlacklist: ['nouveau', 'nvidia'] }, 'drivers[gpu].moduleBlacklist: nvidia is also in drivers[gpu].modules'],
    ['a parameter set twice', { name: 'gpu', preset: 'nvidia', moduleParameters: ['nvidia.NVreg_EnableGpuFirmware=0'], moduleConfig: { 'nvidia.conf': 'NVreg_EnableGpuFirmware=1' } }, 'drivers[gpu].moduleConfig[nvidia.conf]: nvidia.NVreg_EnableGpuFirmware is also set in drivers[gpu].moduleParameters'],
    ['a module config item that is not parameter=value', { name: 'gpu', preset: 'nvidia', moduleConfig: { 'nvidia.conf': 'NVreg_EnableGpuFirmware' } }, 'drivers[gpu].moduleConfig[nvidia.conf]: "NVreg_EnableGpuFirmware" is not parameter=value'],
    ['a kernel named by two flavours', { name: 'gpu', preset: 'nvidia', kernelFlavours: [{ preset: 'nvidia-open', kernels: ['6.1.0-50-amd64'] }, { preset: 'custom', kernels: ['6.1.0-50-amd64'] }] }, 'is named by two flavours'],
    ['a flavour with the entry\'s own preset', { name: 'gpu', preset: 'nvidia', kernelFlavours: [{ preset: 'nvidia', kernels: ['6.1.0-50-amd64'] }] }, 'drivers[gpu].kernelFlavours[0].preset: "nvidia" is the entry\'s own preset'],
    ['an unknown preset', { name: 'gpu', preset: 'nvidia-580' }, 'preset'],
  ])('refuses %s, naming the value', async (_case, driver, message) => {
    expect(await renderError([driver])).toContain(message);
  });
});
