import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import { buildDriver, type BuildDriverOptions } from '../../../../agent/build/build-driver.ts';
import type { BuiltDriver } from '../../../../agent/build/built-driver.ts';

/** The two-module sample driver (drsample_core exports a symbol that drsample_net uses). */
export const SAMPLE_DRIVER_DIR = fileURLToPath(new URL('../../../fixtures/sample-driver', import.meta.url));

/**
 * The kernel release of Debian's linux-headers-amd64 installed by the test setup (never the
 * running kernel's: tests target these headers explicitly). Throws when none is installed.
 */
export function installedHeadersKernel(): string {
  const releases = readdirSync('/usr/src')
    .map((name) => /^linux-headers-(\d.*-amd64)$/.exec(name)?.[1])
    .filter((release) => release !== undefined)
    .sort();
  const newest = releases.at(-1);
  if (newest === undefined) throw new Error('no /usr/src/linux-headers-*-amd64: the test setup must apt-get install linux-headers-amd64');
  return newest;
}

/** version.h of the sample driver for one version: a new version changes the modules' srcversion. */
export function sampleVersionHeader(version: string): Record<string, string> {
  return { 'version.h': `#define DRSAMPLE_VERSION "${version}"\n` };
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** Builds the sample driver at `version` for the installed headers into `cacheDir`. */
export function buildSampleDriver(
  version: string,
  cacheDir: string,
  extra: Partial<Omit<BuildDriverOptions, 'version' | 'cacheDir'>> = {},
): Promise<BuiltDriver> {
  return buildDriver({
    driver: 'drsample',
    version,
    kernelVersion: installedHeadersKernel(),
    source: { kind: 'directory', path: SAMPLE_DRIVER_DIR },
    cacheDir,
    generatedFiles: sampleVersionHeader(version),
    jobs: 2,
    logger: silentLogger(),
    ...extra,
  });
}
