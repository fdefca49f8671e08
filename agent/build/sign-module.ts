import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { ModuleSigningError } from './build-errors.ts';
import { describeCommandFailure } from './describe-command-failure.ts';

/** Key and certificate for Secure Boot module signing, e.g. from a mounted Secret. */
export interface ModuleSigningKey {
  /** PEM private key (or a PKCS#11 URI, as sign-file accepts). */
  readonly privateKeyPath: string;
  /** X.509 certificate, PEM or DER, enrolled in the machine's MOK/db keyring. */
  readonly certificatePath: string;
  /** Digest for the signature (default sha256, the Debian kernel's CONFIG_MODULE_SIG_HASH). */
  readonly hashAlgorithm?: string;
}

/** Appends a PKCS#7 signature to a .ko in place with the headers' `scripts/sign-file`. */
export async function signModule(headersDir: string, key: ModuleSigningKey, modulePath: string): Promise<void> {
  const signFile = join(headersDir, 'scripts', 'sign-file');
  try {
    await access(signFile);
  } catch (error) {
    throw new ModuleSigningError(`module signing requested but ${signFile} does not exist in the kernel headers`, { signFile }, { cause: error });
  }
  const args = [key.hashAlgorithm ?? 'sha256', key.privateKeyPath, key.certificatePath, modulePath];
  const result = await execa(signFile, args, { all: true, reject: false });
  if (result.exitCode !== 0) {
    throw new ModuleSigningError(`signing ${modulePath} failed (exit ${result.exitCode ?? 'signal'}): ${result.all.trim() || describeCommandFailure(result)}`, {
      signFile,
      modulePath,
      exitCode: result.exitCode,
    });
  }
}
