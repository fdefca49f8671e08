import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ifExists, readTextIfExists } from '../../shared/fs/if-exists.ts';
import { describeCommandFailure } from '../build/describe-command-failure.ts';
import { KernelCommandError } from './kernel-errors.ts';
import type { ModuleFile } from './kernel-port.ts';
import { kernelSignaturePolicy, parseSignaturePolicy, type ModuleSignature, type SignaturePolicy } from './plan/module-signature-trust.ts';
import type { KernelSignaturePolicy } from '../../shared/kernel-signature-policy.ts';
import type { HostInfoPort } from '../detect/host-info.ts';

/** EFI variable SecureBoot-<EFI global variable GUID>: 4 bytes of attributes, then 1 when enabled. */
const SECURE_BOOT_VAR = 'firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c';

/**
 * The running kernel's module signature policy and trusted keys, from the host's /sys and /proc.
 * Secure Boot on (the EFI variable) counts as enforcing: Debian, Ubuntu and RHEL kernels lock
 * down and refuse untrusted modules when booted under it, and /sys/kernel/security (securityfs)
 * is seldom mounted in a container.
 */
export async function readSignaturePolicy(dirs: { readonly sysDir?: string; readonly procDir?: string } = {}): Promise<SignaturePolicy> {
  const sys = dirs.sysDir ?? '/sys';
  const policy = parseSignaturePolicy({
    sigEnforce: await readTextIfExists(join(sys, 'module', 'module', 'parameters', 'sig_enforce')),
    lockdown: await readTextIfExists(join(sys, 'kernel', 'security', 'lockdown')),
    procKeys: (await readTextIfExists(join(dirs.procDir ?? '/proc', 'keys'))) ?? '',
  });
  const secureBoot = await ifExists(() => readFile(join(sys, SECURE_BOOT_VAR)));
  if (secureBoot?.[4] !== 1 || policy.enforcedBy.some((e) => e.startsWith('lockdown='))) return policy;
  return { ...policy, enforced: true, enforcedBy: [...policy.enforcedBy, 'Secure Boot'] };
}

/** The node's own facts the agent publishes (shared/kernel-signature-policy.ts): readSignaturePolicy under the running kernel's release. */
export async function readKernelSignaturePolicy(hostInfo: HostInfoPort, dirs: { readonly sysDir?: string; readonly procDir?: string } = {}): Promise<KernelSignaturePolicy> {
  const [policy, host] = await Promise.all([readSignaturePolicy(dirs), hostInfo.readHostInfo()]);
  return kernelSignaturePolicy(policy, host.kernelRelease);
}

/** `modinfo -F signer` and `-F sig_key` of the module's file. */
export async function readModuleSignature(file: ModuleFile): Promise<ModuleSignature> {
  const field = async (name: string): Promise<string | undefined> => {
    const result = await execa('modinfo', ['-F', name, file.path], { reject: false });
    if (result.exitCode !== 0) throw new KernelCommandError({ command: `modinfo -F ${name} ${file.path}`, exitCode: result.exitCode, stderr: describeCommandFailure(result) });
    const value = result.stdout.trim();
    return value === '' ? undefined : value;
  };
  return { module: file.name, signer: await field('signer'), key: await field('sig_key') };
}

/**
 * The signatures of `modules` as the kernel under `policy` would check them: each one's
 * `modinfo` fields when the kernel enforces signatures, none when it does not (nothing to check).
 */
export async function readSignaturesFor(
  policy: SignaturePolicy,
  modules: readonly ModuleFile[],
  read: (file: ModuleFile) => Promise<ModuleSignature> = readModuleSignature,
): Promise<ModuleSignature[]> {
  const signatures: ModuleSignature[] = [];
  if (policy.enforced) for (const module of modules) signatures.push(await read(module));
  return signatures;
}
