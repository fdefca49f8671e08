import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Parser, type ReadEntry } from 'tar';

/** What a docker-archive tarball (`buildah push IMG docker-archive:FILE`) holds, as a runtime would unpack it. */
export interface ImageArchive {
  /** Every path in the image's root filesystem after all layers (whiteouts applied), without a leading slash. */
  readonly files: ReadonlySet<string>;
  /** The image config's `config` part (User, Entrypoint, Env, WorkingDir). */
  readonly config: { User?: string; Entrypoint?: string[]; Cmd?: string[]; Env?: string[]; WorkingDir?: string };
  readonly repoTags: readonly string[];
}

interface Manifest { Config: string; RepoTags?: string[]; Layers: string[] }

/**
 * Reads a docker-archive in one pass: the manifest, the image config and the file list of each
 * layer (layers are tarballs inside the archive), then applies the layers in order with their
 * whiteouts (`.wh.NAME` deletes NAME, `.wh..wh..opq` empties its directory).
 */
export async function readImageArchive(path: string): Promise<ImageArchive> {
  const layers = new Map<string, string[]>();
  const jsons = new Map<string, string>();
  const pending: Promise<void>[] = [];
  const outer = new Parser({
    onReadEntry: (entry: ReadEntry) => {
      const name = entry.path;
      if (name.endsWith('.json')) {
        const chunks: Buffer[] = [];
        entry.on('data', (c: Buffer) => chunks.push(c));
        pending.push(new Promise((resolve) => entry.on('end', () => {
          jsons.set(name, Buffer.concat(chunks).toString('utf8'));
          resolve();
        })));
      } else if (name.endsWith('.tar')) {
        const paths: string[] = [];
        layers.set(name, paths);
        const inner = new Parser({ onReadEntry: (e: ReadEntry) => { paths.push(e.path.replace(/^\.?\//, '').replace(/\/$/, '')); e.resume(); } });
        pending.push(new Promise((resolve, reject) => {
          inner.on('end', resolve);
          inner.on('error', reject);
        }));
        entry.pipe(inner);
      } else {
        entry.resume();
      }
    },
  });
  await pipeline(createReadStream(path), outer);
  await Promise.all(pending);

  const manifestText = jsons.get('manifest.json');
  if (manifestText === undefined) throw new Error(`${path}: no manifest.json (not a docker-archive)`);
  const manifest = (JSON.parse(manifestText) as Manifest[])[0];
  if (manifest === undefined) throw new Error(`${path}: empty manifest.json`);
  const configText = jsons.get(manifest.Config);
  if (configText === undefined) throw new Error(`${path}: image config ${manifest.Config} missing`);
  const files = new Set<string>();
  for (const layer of manifest.Layers) {
    const paths = layers.get(layer);
    if (paths === undefined) throw new Error(`${path}: layer ${layer} missing`);
    applyLayer(files, paths);
  }
  const config = (JSON.parse(configText) as { config?: ImageArchive['config'] }).config ?? {};
  return { files, config, repoTags: manifest.RepoTags ?? [] };
}

/** One layer over the files below it: `.wh.NAME` deletes NAME (and what is under it), `.wh..wh..opq` empties its directory. */
function applyLayer(files: Set<string>, paths: readonly string[]): void {
  const removeUnder = (prefix: string): void => {
    for (const f of files) if (f.startsWith(prefix)) files.delete(f);
  };
  for (const p of paths) {
    const slash = p.lastIndexOf('/');
    const dir = slash < 0 ? '' : `${p.slice(0, slash)}/`;
    const base = p.slice(slash + 1);
    if (base === '.wh..wh..opq') {
      removeUnder(dir);
    } else if (base.startsWith('.wh.')) {
      files.delete(`${dir}${base.slice(4)}`);
      removeUnder(`${dir}${base.slice(4)}/`);
    } else if (p !== '') {
      files.add(p);
    }
  }
}
