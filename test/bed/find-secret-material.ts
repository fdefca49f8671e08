import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';

/**
 * Secret material a log must never hold: PEM blocks (keys, certificates), bearer tokens, JWTs
 * (service-account tokens), base64-encoded PEM (a kubeconfig's `*-data` fields), and the test
 * bed's own secrets given as `known` fragments (see knownSecretFragments). Returns one line per
 * finding, naming the pattern and where it is (`what` is the file or stream name); [] when clean.
 * The findings quote at most the first 12 characters of what matched, so a failing test does not
 * print the secret itself.
 */
export function findSecretMaterial(text: string, what: string, known: readonly string[] = []): string[] {
  const findings: string[] = [];
  const lines = text.split('\n');
  for (const [i, line] of lines.entries()) {
    for (const [name, pattern] of PATTERNS) {
      const match = pattern.exec(line);
      if (match !== null) findings.push(`${what}:${i + 1}: ${name} (${match[0].slice(0, 12)}…)`);
    }
    for (const fragment of known) {
      if (line.includes(fragment)) findings.push(`${what}:${i + 1}: the test bed's own secret (${fragment.slice(0, 12)}…)`);
    }
  }
  return findings;
}

const PATTERNS: readonly (readonly [string, RegExp])[] = [
  ['a PEM block', /-----BEGIN [A-Z0-9 ]*-----/],
  ['a bearer token', /\bbearer\s+[A-Za-z0-9._~+/=-]{8,}/i],
  ['a JWT', /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/],
  // "-----BEGIN " base64-encoded, at each of the three alignments.
  ['base64-encoded PEM', /LS0tLS1CRUdJTi|0tLS0tQkVHSU4g|tLS0tLUJFR0lOI/],
];

/** Fragments long enough to identify a secret and short enough to survive line wrapping. */
const FRAGMENT = 40;

/**
 * Fragments of a control plane's own secrets: every base64 line of every PEM file under
 * `pkiDir` (keys and certificates), and the middle of each `*-data` and `token` value of the
 * kubeconfig at `kubeconfigPath` (their beginnings are the same for every PEM).
 */
export async function knownSecretFragments(pkiDir: string, kubeconfigPath: string): Promise<string[]> {
  const fragments = new Set<string>();
  for (const file of await readdir(pkiDir)) {
    const text = await readFile(join(pkiDir, file), 'utf8');
    if (!text.includes('-----BEGIN ')) continue;
    for (const line of text.split('\n')) {
      if (line.length >= FRAGMENT && !line.startsWith('-----')) fragments.add(line.slice(0, FRAGMENT));
    }
  }
  const kubeconfig = parse(await readFile(kubeconfigPath, 'utf8')) as { users?: { user?: Record<string, unknown> }[]; clusters?: { cluster?: Record<string, unknown> }[] };
  const values = [...(kubeconfig.users ?? []).map((u) => u.user ?? {}), ...(kubeconfig.clusters ?? []).map((c) => c.cluster ?? {})].flatMap((entry) =>
    Object.entries(entry).filter(([k, v]) => (k.endsWith('-data') || k === 'token') && typeof v === 'string').map(([, v]) => v as string),
  );
  for (const value of values) {
    const middle = Math.max(0, Math.floor(value.length / 2) - FRAGMENT / 2);
    if (value.length >= FRAGMENT) fragments.add(value.slice(middle, middle + FRAGMENT));
  }
  return [...fragments];
}
