import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The pinned component versions, read from versions.env (the one place they are set). */
export interface TestBedVersions {
  readonly KUBERNETES_VERSION: string;
  readonly ETCD_VERSION: string;
  readonly KWOK_VERSION: string;
}

export function readVersions(): TestBedVersions {
  const text = readFileSync(join(import.meta.dirname, 'versions.env'), 'utf8');
  const entries = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^([A-Z_]+)=(\S+)\s*$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) entries.set(match[1], match[2]);
  }
  const get = (key: keyof TestBedVersions): string => {
    const value = entries.get(key);
    if (value === undefined) throw new Error(`test/bed/versions.env lacks ${key}`);
    return value;
  };
  return { KUBERNETES_VERSION: get('KUBERNETES_VERSION'), ETCD_VERSION: get('ETCD_VERSION'), KWOK_VERSION: get('KWOK_VERSION') };
}
