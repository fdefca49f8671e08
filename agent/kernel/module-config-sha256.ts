import { createHash } from 'node:crypto';
import type { ModuleConfigFile } from './plan/module-config.ts';

/**
 * SHA-256 (hex) of `<name>=<base64 of content>;` over the files sorted by name: what the chart
 * computes from the same data with `b64enc` and `sha256sum`, so the two agree byte for byte.
 */
export function moduleConfigSha256(files: readonly ModuleConfigFile[]): string {
  const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const text = sorted.map((f) => `${f.name}=${Buffer.from(f.content, 'utf8').toString('base64')};`).join('');
  return createHash('sha256').update(text).digest('hex');
}
