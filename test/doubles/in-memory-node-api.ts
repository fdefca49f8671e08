import { abortReason } from '../../shared/abortable-sleep.ts';
import { NodeAccessError } from '../../init-container/errors.ts';
import type { NodeApi, NodeListing, NodeView, NodeWatchEvent } from '../../init-container/node-api.ts';

type Verb = 'patch' | 'list' | 'watch';

interface Subscriber {
  readonly name: string;
  push(event: NodeWatchEvent): void;
  close(): void;
}

/** Thrown while the in-memory "API server" is down: what a refused connection looks like. */
export class ApiServerUnavailable extends Error {
  constructor() {
    super('connect ECONNREFUSED (in-memory API server is down)');
    this.name = 'ApiServerUnavailable';
  }
}

/**
 * A faithful in-memory model of the Node endpoints the gate uses: a global resourceVersion
 * counter, per-node history so a watch resumes from any version, compaction (a watch from a
 * compacted version gets an in-stream 410 like etcd-backed watches), dropped streams, an API
 * server that is down, and RBAC denials. Tests drive it as the coordinator and the cluster would.
 */
export class InMemoryNodeApi implements NodeApi {
  private revision = 1;
  private compactedRevision = 0;
  private readonly nodes = new Map<string, NodeView>();
  private readonly history: { revision: number; event: NodeWatchEvent & { type: 'ADDED' | 'MODIFIED' | 'DELETED' } }[] = [];
  private readonly subscribers = new Set<Subscriber>();
  private readonly denied = new Set<Verb>();
  private down = false;
  private transientFailures = 0;
  /** Requests seen, per verb: lets tests assert re-lists and re-watches. */
  readonly requests: Record<Verb, number> = { patch: 0, list: 0, watch: 0 };

  addNode(name: string, init: { labels?: Record<string, string>; annotations?: Record<string, string>; unschedulable?: boolean } = {}): void {
    this.write('ADDED', {
      name,
      uid: `uid-${name}`,
      resourceVersion: '',
      labels: init.labels ?? {},
      annotations: init.annotations ?? {},
      unschedulable: init.unschedulable ?? false,
    });
  }

  node(name: string): NodeView | undefined {
    return this.nodes.get(name);
  }

  /** What the coordinator does: set (string) or remove (null) annotations as an admin. */
  annotate(name: string, annotations: Readonly<Record<string, string | null>>): void {
    const node = this.mustGet(name);
    this.write('MODIFIED', { ...node, annotations: mergeMap(node.annotations, annotations) });
  }

  label(name: string, labels: Readonly<Record<string, string | null>>): void {
    const node = this.mustGet(name);
    this.write('MODIFIED', { ...node, labels: mergeMap(node.labels, labels) });
  }

  cordon(name: string, unschedulable = true): void {
    this.write('MODIFIED', { ...this.mustGet(name), unschedulable });
  }

  deleteNode(name: string): void {
    this.write('DELETED', this.mustGet(name));
  }

  /** Forget history up to now: a watch from any older version gets 410 Gone. */
  compact(): void {
    this.compactedRevision = this.revision;
    this.history.length = 0;
  }

  /** Ends every open watch stream the way a server-side timeout or a proxy reset does. */
  dropWatches(): void {
    for (const s of [...this.subscribers]) {
      // A closed stream delivers nothing more, even events written before its reader notices.
      this.subscribers.delete(s);
      s.close();
    }
  }

  /** Down: every request fails as a refused connection and open watches end. Up: serves again. */
  setDown(down: boolean): void {
    this.down = down;
    if (down) this.dropWatches();
  }

  /** The next `count` requests fail with a 500-like transient error. */
  failNextRequests(count: number): void {
    this.transientFailures = count;
  }

  deny(verb: Verb): void {
    this.denied.add(verb);
  }

  patchNodeAnnotations(name: string, annotations: Readonly<Record<string, string | null>>, signal: AbortSignal): Promise<void> {
    return this.request('patch', name, signal, () => {
      const node = this.nodes.get(name);
      if (node === undefined) throw notFound(name, 'patch');
      this.write('MODIFIED', { ...node, annotations: mergeMap(node.annotations, annotations) });
    });
  }

  listNode(name: string, signal: AbortSignal): Promise<NodeListing> {
    return this.request('list', name, signal, () => ({ node: this.nodes.get(name), resourceVersion: String(this.revision) }));
  }

  async *watchNode(name: string, resourceVersion: string, signal: AbortSignal): AsyncIterable<NodeWatchEvent> {
    await this.request('watch', name, signal, () => undefined);
    const from = Number(resourceVersion);
    if (from < this.compactedRevision) {
      yield { type: 'ERROR', code: 410, message: `too old resource version: ${resourceVersion} (${this.compactedRevision})` };
      return;
    }
    const pending: NodeWatchEvent[] = this.history
      .filter((h) => h.revision > from && h.event.node.name === name)
      .map((h) => h.event);
    const stream = { closed: false };
    let wake: (() => void) | undefined;
    const notify = (): void => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const subscriber: Subscriber = {
      name,
      push: (event) => {
        pending.push(event);
        notify();
      },
      close: () => {
        stream.closed = true;
        notify();
      },
    };
    this.subscribers.add(subscriber);
    signal.addEventListener('abort', notify, { once: true });
    try {
      for (;;) {
        const event = pending.shift();
        if (event !== undefined) {
          yield event;
          continue;
        }
        if (signal.aborted) throw abortReason(signal);
        if (stream.closed) return;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    } finally {
      this.subscribers.delete(subscriber);
      signal.removeEventListener('abort', notify);
    }
  }

  /** Number of watch streams open now. */
  get openWatches(): number {
    return this.subscribers.size;
  }

  private async request<T>(verb: Verb, name: string, signal: AbortSignal, serve: () => T): Promise<T> {
    this.requests[verb] += 1;
    // A real request crosses the event loop at least once.
    await Promise.resolve();
    if (signal.aborted) throw abortReason(signal);
    if (this.down) throw new ApiServerUnavailable();
    if (this.transientFailures > 0) {
      this.transientFailures -= 1;
      throw new Error('Internal Server Error (injected)');
    }
    if (this.denied.has(verb)) {
      throw new NodeAccessError({
        node: name,
        verb,
        resource: 'nodes',
        problem: 'forbidden',
        status: 403,
        reason: `nodes "${name}" is forbidden: User "system:serviceaccount:test:driver" cannot ${verb} resource "nodes"`,
      });
    }
    return serve();
  }

  private write(type: 'ADDED' | 'MODIFIED' | 'DELETED', node: NodeView): void {
    this.revision += 1;
    const stored = { ...node, resourceVersion: String(this.revision) };
    if (type === 'DELETED') this.nodes.delete(node.name);
    else this.nodes.set(node.name, stored);
    const event = { type, node: stored };
    this.history.push({ revision: this.revision, event });
    for (const s of this.subscribers) if (s.name === node.name) s.push(event);
  }

  private mustGet(name: string): NodeView {
    const node = this.nodes.get(name);
    if (node === undefined) throw new Error(`in-memory node "${name}" does not exist`);
    return node;
  }
}

function mergeMap(base: Readonly<Record<string, string>>, patch: Readonly<Record<string, string | null>>): Record<string, string> {
  const out: Record<string, string> = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) Reflect.deleteProperty(out, key);
    else out[key] = value;
  }
  return out;
}

function notFound(name: string, verb: Verb): NodeAccessError {
  return new NodeAccessError({ node: name, verb, resource: 'nodes', problem: 'not-found', status: 404, reason: `nodes "${name}" not found` });
}
