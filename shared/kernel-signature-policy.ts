/**
 * A node's own module-signature facts, about no driver build: whether its running kernel
 * enforces module signatures (module.sig_enforce, lockdown, Secure Boot) and which keys it
 * trusts. The agent of any driver version publishes them on its node at its start, before it
 * builds or loads anything (`driver-rollout.io/<driver>-driver.kernel-signature-policy`); the
 * coordinator compares them with the signer the newest template declares
 * (MODULE_SIGNER_ANNOTATION), so it knows before the first cordon whether the node's kernel would
 * refuse a build no node has run yet. Whether one signer is trusted is decided here for both
 * programs (isSignerTrusted). Pure; no I/O.
 */
import { parseJsonObject } from './driver-identity.ts';

/** A key the kernel trusts for modules, as /proc/keys describes it: `<subject CN>: <key id hex>`. */
export interface TrustedKey {
  /** The certificate's subject common name (what `modinfo -F signer` shows for modules it signed). */
  readonly name: string;
  /** Lower-case hex: the certificate's subject key identifier (or its serial number when it has none). */
  readonly id: string;
}

/** The node's facts as published: the running kernel, what makes it enforce signatures, its keys. */
export interface KernelSignaturePolicy {
  /** The running kernel's release (`uname -r`) the facts were read under. */
  readonly kernel: string;
  /** `module.sig_enforce`, `lockdown=integrity`, `Secure Boot`; empty: the kernel loads any module. */
  readonly enforcedBy: readonly string[];
  /** Asymmetric keys in the kernel's keyrings (.builtin_trusted_keys, .secondary_trusted_keys, .machine, .platform). */
  readonly keys: readonly TrustedKey[];
}

/** The declared signer of modules that carry no signature (MODULE_SIGNER_ANNOTATION). */
export const UNSIGNED = 'unsigned';

/** `66:F5:4E` → `66f54e`. */
export function keyIdHex(colonHex: string): string {
  return colonHex.replaceAll(':', '').toLowerCase();
}

/**
 * Whether a kernel holding `keys` accepts a module signed by `signer` (`modinfo -F signer`;
 * undefined or UNSIGNED: no signature), whose signature names `key` (`modinfo -F sig_key`, colon
 * hex) when known. Matched by key id when the module names one a keyring holds (sign-file -k),
 * else by the signer's name: /proc/keys shows a key's subject key identifier while a module
 * names its certificate's serial number, so two certificates of one name are not told apart (the
 * kernel's own refusal at load still ends in the agent's rollback).
 */
export function isSignerTrusted(keys: readonly TrustedKey[], signer: string | undefined, key?: string): boolean {
  if (signer === undefined || signer === UNSIGNED) return false;
  const id = key === undefined ? undefined : keyIdHex(key);
  return keys.some((k) => k.id === id) || keys.some((k) => k.name === signer);
}

/** The names of the keys the kernel trusts, each once, for messages. */
export function trustedKeyNames(keys: readonly TrustedKey[]): string[] {
  return [...new Set(keys.map((k) => k.name))];
}

/** The annotation's value: compact JSON, `{"kernel":...,"enforcedBy":[...],"keys":[{"name":...,"id":...}]}`. */
export function renderKernelSignaturePolicy(policy: KernelSignaturePolicy): string {
  return JSON.stringify({ kernel: policy.kernel, enforcedBy: policy.enforcedBy, keys: policy.keys.map((k) => ({ name: k.name, id: k.id })) });
}

/** Reads the annotation; null when it is not the agent's record. */
export function parseKernelSignaturePolicy(text: string): KernelSignaturePolicy | null {
  const parsed = parseJsonObject(text);
  if (parsed === null) return null;
  const { kernel, enforcedBy, keys } = parsed;
  if (typeof kernel !== 'string' || kernel === '' || !Array.isArray(enforcedBy) || !enforcedBy.every((e) => typeof e === 'string') || !Array.isArray(keys)) return null;
  const trusted: TrustedKey[] = [];
  for (const entry of keys as unknown[]) {
    const { name, id } = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    if (typeof name !== 'string' || typeof id !== 'string') return null;
    trusted.push({ name, id });
  }
  return { kernel, enforcedBy, keys: trusted };
}
