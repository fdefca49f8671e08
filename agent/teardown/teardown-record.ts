import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { readTextIfExists } from '../../shared/fs/if-exists.ts';
import { DriverRolloutError } from '../../shared/errors.ts';
import type { BindingToRemove, VirtualFunctionsToRemove } from './plan-device-teardown.ts';

/**
 * What the agent took down before an unload and must put back after the load. Written on a host
 * path (beside the module cache) BEFORE anything is taken down, so an agent that dies midway
 * (or a new pod) finishes the restore; removed once everything is back.
 */
export interface TeardownRecord {
  readonly driver: string;
  /** Holder commands stopped, in stop order (started again in reverse). */
  readonly holders: readonly string[];
  readonly removedVirtualFunctions: readonly VirtualFunctionsToRemove[];
  readonly removedBindings: readonly BindingToRemove[];
  readonly recordedAt: string;
}

export class TeardownRecordError extends DriverRolloutError {}

export async function readTeardownRecord(path: string): Promise<TeardownRecord | undefined> {
  const text = await readTextIfExists(path);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as TeardownRecord;
  } catch (error) {
    throw new TeardownRecordError(`the teardown record ${path} is not JSON: restore by hand (see agent/README.md) and remove it`, { path }, { cause: error });
  }
}

/** Atomic (write, then rename): a crash leaves the old record or the new one, never half of one. */
export async function writeTeardownRecord(path: string, record: TeardownRecord): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, `${JSON.stringify(record, null, 2)}\n`);
  await rename(tmp, path);
}

export async function removeTeardownRecord(path: string): Promise<void> {
  await rm(path, { force: true });
}
