/**
 * Will the running kernel accept these modules' signatures? Pure: the kernel's policy and keys come
 * in as text read from /sys and /proc, the modules' signatures as `modinfo` reports them.
 */
import { isSignerTrusted, trustedKeyNames as namesOf, type KernelSignaturePolicy, type TrustedKey } from '../../../shared/kernel-signature-policy.ts';
import type { RefusedModule, SignatureVerdict } from '../../../shared/module-signature-verdict.ts';

/** Whether the kernel refuses unsigned or untrusted modules, and why. */
export interface SignaturePolicy {
  /** `module.sig_enforce=1` (or CONFIG_MODULE_SIG_FORCE), or lockdown in integrity/confidentiality mode (Secure Boot). */
  readonly enforced: boolean;
  /** What enforces it: `module.sig_enforce`, `lockdown=integrity`; empty when not enforced. */
  readonly enforcedBy: readonly string[];
  /** Asymmetric keys in the kernel's keyrings (.builtin_trusted_keys, .secondary_trusted_keys, .machine, .platform). */
  readonly keys: readonly TrustedKey[];
}

/** A module's appended signature as `modinfo` shows it; `undefined` signer: unsigned. */
export interface ModuleSignature {
  readonly module: string;
  /** `modinfo -F signer`: the signing certificate's subject CN. */
  readonly signer: string | undefined;
  /** `modinfo -F sig_key`: colon hex (`66:F5:...`), the certificate's serial number (or key id with sign-file -k). */
  readonly key: string | undefined;
}


/**
 * The kernel's policy from its files: `/sys/module/module/parameters/sig_enforce` (`Y`/`N`, absent
 * without CONFIG_MODULE_SIG), `/sys/kernel/security/lockdown` (`none [integrity] confidentiality`,
 * absent without securityfs or the LSM) and `/proc/keys`.
 */
export function parseSignaturePolicy(files: { readonly sigEnforce: string | undefined; readonly lockdown: string | undefined; readonly procKeys: string }): SignaturePolicy {
  const enforcedBy: string[] = [];
  if (files.sigEnforce?.trim() === 'Y') enforcedBy.push('module.sig_enforce');
  const lockdown = /\[(\w+)\]/.exec(files.lockdown ?? '')?.[1];
  if (lockdown !== undefined && lockdown !== 'none') enforcedBy.push(`lockdown=${lockdown}`);
  return { enforced: enforcedBy.length > 0, enforcedBy, keys: parseProcKeys(files.procKeys) };
}

/**
 * The asymmetric keys in /proc/keys: `<id> <flags> <usage> <timeout> <perm> <uid> <gid> asymmetri
 * <CN>: <hex>: X509.rsa <short id> []`. The keyrings themselves (type `keyring`) are not keys. Every
 * asymmetric key root can see there is in a system keyring in practice: /proc/keys does not say
 * which (that needs keyctl), so one only in .platform (firmware db keys, trusted for kexec) counts too.
 */
export function parseProcKeys(text: string): TrustedKey[] {
  const keys: TrustedKey[] = [];
  for (const line of text.split('\n')) {
    const match = /^\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+asymmetri\s+(.+?): ([0-9a-f]+)(?::|$)/.exec(line.trim());
    if (match?.[1] !== undefined && match[2] !== undefined) keys.push({ name: match[1], id: match[2] });
  }
  return keys;
}

/**
 * The modules the kernel would refuse under `policy` (none when not enforced): unsigned ones, and
 * ones whose signer is no trusted key (shared/kernel-signature-policy.ts isSignerTrusted: by key
 * id, else by the signer's name).
 */
export function findUntrustedModules(policy: SignaturePolicy, signatures: readonly ModuleSignature[]): RefusedModule[] {
  if (!policy.enforced) return [];
  return signatures.filter((s) => !isSignerTrusted(policy.keys, s.signer, s.key)).map((s) => ({ module: s.module, signedBy: describeSigner(s) }));
}

export function describeSigner(signature: ModuleSignature): string {
  if (signature.signer === undefined) return 'unsigned';
  return `"${signature.signer}"${signature.key === undefined ? '' : ` (key ${signature.key})`}`;
}

/**
 * The verdict the agent publishes (shared/module-signature-verdict.ts): `policy` applied to the
 * signatures of the modules of the driver identity `fingerprint`, built for `kernel`.
 */
export function signatureVerdict(policy: SignaturePolicy, signatures: readonly ModuleSignature[], of: { readonly fingerprint: string; readonly kernel: string }): SignatureVerdict {
  return {
    fingerprint: of.fingerprint,
    kernel: of.kernel,
    enforcedBy: policy.enforcedBy,
    untrusted: findUntrustedModules(policy, signatures),
    trustedKeys: trustedKeyNames(policy),
  };
}

/** The names of the keys the kernel trusts, each once, for messages. */
export function trustedKeyNames(policy: SignaturePolicy): string[] {
  return namesOf(policy.keys);
}

/** The node's own facts the agent publishes at its start (shared/kernel-signature-policy.ts): `policy` under the running kernel `kernel`. */
export function kernelSignaturePolicy(policy: SignaturePolicy, kernel: string): KernelSignaturePolicy {
  return { kernel, enforcedBy: policy.enforcedBy, keys: policy.keys };
}
