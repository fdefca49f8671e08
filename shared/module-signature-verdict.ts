/**
 * The agent's word on whether a kernel would accept a driver's modules under its signature
 * policy (module.sig_enforce, lockdown, Secure Boot), for one driver identity
 * (shared/driver-identity.ts) and one kernel. The agent publishes it on its node
 * (`driver-rollout.io/<driver>-driver.module-signatures`) before it unloads anything; the
 * coordinator holds a node's start while the verdict about the identity the newest template
 * loads says the kernel would refuse it. A verdict about another identity (the build the node
 * runs now) says nothing about the new one, in either direction. Pure; no I/O.
 */
import { driverFingerprint, driverIdentityIn, parseJsonObject } from './driver-identity.ts';

/** A module the kernel would refuse, and why: `unsigned`, or `"<signer>" (key <colon hex>)`. */
export interface RefusedModule {
  readonly module: string;
  readonly signedBy: string;
}

export interface SignatureVerdict {
  /** The driver identity the modules are of (driverFingerprint). */
  readonly fingerprint: string;
  /** The kernel release whose policy was applied. */
  readonly kernel: string;
  /** What makes the kernel enforce signatures (`module.sig_enforce`, `lockdown=integrity`, `Secure Boot`); empty: it does not. */
  readonly enforcedBy: readonly string[];
  /** The modules it would refuse; empty: it accepts the driver. */
  readonly untrusted: readonly RefusedModule[];
  /** The names of the keys the kernel trusts, for the message. */
  readonly trustedKeys: readonly string[];
}

/** How to make a refused driver acceptable, in every message that reports a refusal. */
export const ENROLL_HINT =
  'sign the modules with an enrolled key, or enroll the signing certificate (mokutil --import <certificate.der>, then confirm it in MokManager at the next boot)';

/** The kernel would refuse the driver. */
export function isRefused(verdict: SignatureVerdict): boolean {
  return verdict.untrusted.length > 0;
}

/**
 * `the kernel enforces module signatures (module.sig_enforce) and would refuse gpu: nvidia signed
 * by "X" (key 1A:2B), a key not in its trusted keyrings; the keys it trusts: Debian Secure Boot CA;
 * sign the modules with an enrolled key, or enroll ...`: the refusal, naming the modules, their
 * signers and how to enroll the key.
 */
export function describeRefusal(driver: string, verdict: Pick<SignatureVerdict, 'enforcedBy' | 'untrusted' | 'trustedKeys'>): string {
  const { enforcedBy, untrusted, trustedKeys } = verdict;
  const signers = [...new Set(untrusted.map((u) => u.signedBy))];
  const modules = (signedBy: string): string => untrusted.filter((u) => u.signedBy === signedBy).map((u) => u.module).join(', ');
  const what = signers.map((s) => (s === 'unsigned' ? `${modules(s)} unsigned` : `${modules(s)} signed by ${s}, a key not in its trusted keyrings`)).join('; ');
  return (
    `the kernel enforces module signatures (${enforcedBy.join(', ')}) and would refuse ${driver}: ${what}; ` +
    `the keys it trusts: ${trustedKeys.length === 0 ? 'none' : trustedKeys.join(', ')}; ${ENROLL_HINT}`
  );
}

/** The annotation's value: compact JSON, `{"driver":<fingerprint>,"kernel":...,"enforcedBy":[...],"untrusted":[...],"trustedKeys":[...]}`. */
export function renderSignatureVerdict(verdict: SignatureVerdict): string {
  const rest = JSON.stringify({
    kernel: verdict.kernel,
    enforcedBy: verdict.enforcedBy,
    untrusted: verdict.untrusted.map((u) => ({ module: u.module, signedBy: u.signedBy })),
    trustedKeys: verdict.trustedKeys,
  });
  return `{"driver":${verdict.fingerprint},${rest.slice(1)}`;
}

/** Reads the annotation; the driver part is re-canonicalised. null when it is not a verdict. */
export function parseSignatureVerdict(text: string): SignatureVerdict | null {
  const parsed = parseJsonObject(text);
  if (parsed === null) return null;
  const { driver, kernel, enforcedBy, untrusted, trustedKeys } = parsed;
  const identity = driverIdentityIn(driver);
  const strings = (v: unknown): string[] | null => (Array.isArray(v) && v.every((s) => typeof s === 'string') ? v : null);
  const enforced = strings(enforcedBy);
  const trusted = strings(trustedKeys);
  if (identity === null || typeof kernel !== 'string' || enforced === null || trusted === null || !Array.isArray(untrusted)) return null;
  const refused: RefusedModule[] = [];
  for (const entry of untrusted as unknown[]) {
    const { module, signedBy } = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    if (typeof module !== 'string' || typeof signedBy !== 'string') return null;
    refused.push({ module, signedBy });
  }
  return { fingerprint: driverFingerprint(identity), kernel, enforcedBy: enforced, untrusted: refused, trustedKeys: trusted };
}
