import { readdir, readFile, readlink } from 'node:fs/promises';

/**
 * Counts the TCP connections one process holds to the API server, as the kernel shows them at
 * the server's port (/proc/net/tcp{,6}: established sockets whose remote port is the API
 * server's, owned by `pid`). Sampled every `intervalMs`: a connection that opens and closes
 * between two samples is missed, so the counts are lower bounds; a connection the programs
 * open per request lived for seconds (undici keeps an idle socket 4 s), far above the interval.
 */
export interface ApiConnectionSampler {
  /** Connections seen so far (local port + socket inode), each counted once. */
  seen(): ReadonlySet<string>;
  /** The most connections open at one sample. */
  peak(): number;
  stop(): Promise<void>;
}

export function sampleApiConnections(pid: number, apiPort: number, intervalMs = 20): ApiConnectionSampler {
  const seen = new Set<string>();
  let peak = 0;
  const run = { stopped: false };
  const loop = (async () => {
    while (!run.stopped) {
      const open = await openApiConnections(pid, apiPort);
      for (const c of open) seen.add(c);
      peak = Math.max(peak, open.size);
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    seen: () => seen,
    peak: () => peak,
    async stop() {
      run.stopped = true;
      await loop;
    },
  };
}

/** Established connections from `pid` to `apiPort` now, as `<local port>/<inode>`; empty once the process is gone. */
export async function openApiConnections(pid: number, apiPort: number): Promise<Set<string>> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = await readdir(`/proc/${pid}/fd`);
  } catch {
    return new Set();
  }
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m?.[1] !== undefined) inodes.add(m[1]);
  }
  const open = new Set<string>();
  for (const table of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${table}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      const [local, remote, state, inode] = [f[1], f[2], f[3], f[9]];
      if (local === undefined || remote === undefined || inode === undefined || state !== '01') continue; // 01: ESTABLISHED
      if (Number.parseInt(remote.split(':')[1] ?? '', 16) !== apiPort || !inodes.has(inode)) continue;
      open.add(`${Number.parseInt(local.split(':')[1] ?? '', 16)}/${inode}`);
    }
  }
  return open;
}
