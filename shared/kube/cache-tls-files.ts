import { readFileSync } from 'node:fs';
import type { Cluster, KubeConfig, User } from '@kubernetes/client-node';

/**
 * How long TLS material read from files (a CA, a client certificate and key) is used before the
 * files are read again: a rotated file is picked up within this long. client-node itself reads
 * a token file at most once a minute.
 */
export const TLS_FILES_RECHECK_MS = 10_000;

export interface CacheTlsFilesOptions {
  readonly recheckMs: number;
  /** Milliseconds, monotonic enough for an interval (tests pass their own clock). */
  readonly now: () => number;
}

/**
 * Makes `kc` read its TLS files at most once per `recheckMs` instead of on every request.
 *
 * client-node 2.0.1 reads the current cluster's `caFile` and the user's `certFile` and `keyFile`
 * with readFileSync before every request (KubeConfig.applyHTTPSOptions), on the event loop: three
 * blocking reads per request (docs/decisions/0004-client-node-connections-and-tls-files.md).
 * This replaces `getCurrentCluster` and `getCurrentUser` on this instance with
 * versions that present the files' contents as inline data (caData, certData, keyData), read
 * again once `recheckMs` has passed. Everything else about the cluster and user is kept. A file
 * that cannot be read leaves the original object in place, so the request fails in client-node
 * as it always has, naming the file.
 */
export function cacheTlsFiles(kc: KubeConfig, options: CacheTlsFilesOptions = { recheckMs: TLS_FILES_RECHECK_MS, now: () => performance.now() }): KubeConfig {
  const getCluster = kc.getCurrentCluster.bind(kc);
  const getUser = kc.getCurrentUser.bind(kc);
  const clusters = new InlinedFiles<Cluster>(options, (cluster, read) => {
    const { caFile, ...rest } = cluster;
    return isNamed(caFile) ? { ...rest, caData: read(caFile) } : cluster;
  });
  const users = new InlinedFiles<User>(options, (user, read) => {
    const { certFile, keyFile, ...rest } = user;
    if (!isNamed(certFile) && !isNamed(keyFile)) return user;
    return { ...rest, ...(isNamed(certFile) ? { certData: read(certFile) } : {}), ...(isNamed(keyFile) ? { keyData: read(keyFile) } : {}) };
  });
  kc.getCurrentCluster = () => clusters.of(getCluster());
  kc.getCurrentUser = () => users.of(getUser());
  return kc;
}

/** A file path is given (client-node reads a file only then). */
function isNamed(file: string | undefined): file is string {
  return file !== undefined && file !== '';
}

/** The last inlined copy of one object (the current cluster or user), kept for `recheckMs`. */
class InlinedFiles<T extends object> {
  readonly #options: CacheTlsFilesOptions;
  readonly #inline: (original: T, read: (file: string) => string) => T;
  #last: { original: T; inlined: T; at: number } | undefined;

  constructor(options: CacheTlsFilesOptions, inline: (original: T, read: (file: string) => string) => T) {
    this.#options = options;
    this.#inline = inline;
  }

  of(original: T | null): T | null {
    if (original === null) return null;
    const at = this.#options.now();
    const last = this.#last;
    if (last !== undefined && last.original === original && at - last.at < this.#options.recheckMs) return last.inlined;
    let inlined: T;
    try {
      inlined = this.#inline(original, (file) => readFileSync(file).toString('base64'));
    } catch {
      // client-node reads the file itself and fails the request with its own error.
      this.#last = undefined;
      return original;
    }
    this.#last = { original, inlined, at };
    return inlined;
  }
}
