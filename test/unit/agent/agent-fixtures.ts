import { cp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SAMPLE_DRIVER_DIR } from './build/sample-driver.ts';

/** A copy of the sample driver's sources at `version` (its version.h sets the modules' srcversion). */
export async function writeSampleDriverSource(dir: string, version: string): Promise<string> {
  await cp(SAMPLE_DRIVER_DIR, dir, { recursive: true });
  await writeFile(join(dir, 'version.h'), `#define DRSAMPLE_VERSION "${version}"\n`);
  return dir;
}
