/**
 * The node's own signature facts as the agent reads them at its start (readKernelSignaturePolicy):
 * the running kernel's release, what makes it enforce signatures, and its keys, from a host's /sys
 * and /proc laid out in a temporary directory.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HostInfoPort } from '../../../../agent/detect/host-info.ts';
import { readKernelSignaturePolicy } from '../../../../agent/kernel/read-signature-policy.ts';

const HOST: HostInfoPort = { readHostInfo: () => Promise.resolve({ kernelRelease: '6.1.0-56-amd64', distro: 'debian', distroRelease: '12', arch: 'x86_64' }) };
const PROC_KEYS = [
  '1602cf70 I------     2 perm 1f0b0000     0     0 keyring   .builtin_trusted_keys: 1',
  '0f1a2e50 I------     1 perm 1f030000     0     0 asymmetri Debian Secure Boot CA: 6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1: X509.rsa bb419ea1 []',
].join('\n');

let root: string;
const sysDir = () => join(root, 'sys');
const procDir = () => join(root, 'proc');

async function write(path: string, content: string | Uint8Array): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, content);
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'kernel-signature-policy-'));
  await mkdir(sysDir(), { recursive: true });
  await write(join(procDir(), 'keys'), PROC_KEYS);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('readKernelSignaturePolicy', () => {
  it('reads a Secure Boot host with module.sig_enforce: the running kernel, both reasons, its keys', async () => {
    await write(join(sysDir(), 'module', 'module', 'parameters', 'sig_enforce'), 'Y\n');
    // EFI variable: 4 bytes of attributes, then 1 (enabled).
    await write(join(sysDir(), 'firmware', 'efi', 'efivars', 'SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'), new Uint8Array([6, 0, 0, 0, 1]));
    expect(await readKernelSignaturePolicy(HOST, { sysDir: sysDir(), procDir: procDir() })).toEqual({
      kernel: '6.1.0-56-amd64',
      enforcedBy: ['module.sig_enforce', 'Secure Boot'],
      keys: [{ name: 'Debian Secure Boot CA', id: '6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1' }],
    });
  });

  it('reads a host that enforces nothing (no sig_enforce, Secure Boot off): no reasons, the keys all the same', async () => {
    await write(join(sysDir(), 'firmware', 'efi', 'efivars', 'SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'), new Uint8Array([6, 0, 0, 0, 0]));
    expect(await readKernelSignaturePolicy(HOST, { sysDir: sysDir(), procDir: procDir() })).toEqual({
      kernel: '6.1.0-56-amd64',
      enforcedBy: [],
      keys: [{ name: 'Debian Secure Boot CA', id: '6ccece7e4c6c0d1f6149f3dd27dfcc5cbb419ea1' }],
    });
  });
});
