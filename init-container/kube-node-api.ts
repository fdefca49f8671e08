import { CoreV1Api, Watch, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { apiErrorMessage, apiStatusCode } from '../shared/kube/api-error.ts';
import { MERGE_PATCH } from '../shared/kube/patch-options.ts';
import { abortReason } from '../shared/abortable-sleep.ts';
import { NodeAccessError, type NodeAccessProblem } from './errors.ts';
import type { NodeApi, NodeListing, NodeView, NodeWatchEvent } from './node-api.ts';

/**
 * Server-side watch timeout. client-node's Watch aborts a stream after 30 s without data, so
 * the server is asked to end it cleanly first; the gate then re-watches from the last
 * resourceVersion it saw and misses nothing.
 */
const WATCH_TIMEOUT_SECONDS = 25;

/** The NodeApi port on a real API server. */
export function createKubeNodeApi(kc: KubeConfig): NodeApi {
  const core = kc.makeApiClient(CoreV1Api);
  const watcher = new Watch(kc);
  return {
    async patchNodeAnnotations(name, annotations, signal) {
      try {
        await untilAborted(core.patchNode({ name, body: { metadata: { annotations } } }, MERGE_PATCH), signal);
      } catch (error) {
        throw asNodeAccessError(error, name, 'patch') ?? error;
      }
    },
    async listNode(name, signal): Promise<NodeListing> {
      try {
        const list = await untilAborted(core.listNode({ fieldSelector: `metadata.name=${name}` }), signal);
        const item = list.items.find((n) => n.metadata?.name === name);
        return { node: item === undefined ? undefined : toNodeView(item), resourceVersion: list.metadata?.resourceVersion ?? '' };
      } catch (error) {
        throw asNodeAccessError(error, name, 'list') ?? error;
      }
    },
    watchNode(name, resourceVersion, signal) {
      return watchOneNode(watcher, name, resourceVersion, signal);
    },
  };
}

function watchOneNode(watcher: Watch, name: string, resourceVersion: string, signal: AbortSignal): AsyncIterable<NodeWatchEvent> {
  const queue = new EventQueue<NodeWatchEvent>();
  let controller: AbortController | undefined;
  const onAbort = (): void => {
    controller?.abort();
    queue.fail(abortReason(signal));
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  const query = {
    fieldSelector: `metadata.name=${name}`,
    resourceVersion,
    allowWatchBookmarks: true,
    timeoutSeconds: WATCH_TIMEOUT_SECONDS,
  };
  watcher
    .watch('/api/v1/nodes', query, (type: string, object: unknown) => {
      const event = toWatchEvent(type, object);
      if (event !== undefined) queue.push(event);
    }, (error: unknown) => {
      signal.removeEventListener('abort', onAbort);
      if (error === null || error === undefined) queue.end();
      else queue.fail(asNodeAccessError(error, name, 'watch') ?? toError(error));
    })
    .then((c) => {
      controller = c;
      if (signal.aborted) c.abort();
    })
    .catch((error: unknown) => {
      queue.fail(toError(error));
    });
  return queue;
}

function toWatchEvent(type: string, object: unknown): NodeWatchEvent | undefined {
  switch (type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
      return { type, node: toNodeView(object as V1Node) };
    case 'BOOKMARK':
      return { type, resourceVersion: (object as V1Node).metadata?.resourceVersion ?? '' };
    case 'ERROR': {
      const status = object as { code?: unknown; message?: unknown };
      return {
        type,
        code: typeof status.code === 'number' ? status.code : 500,
        message: typeof status.message === 'string' ? status.message : 'watch error',
      };
    }
    default:
      return undefined;
  }
}

/** Watch objects arrive as plain JSON, API responses as V1Node: both have the same shape. */
export function toNodeView(node: V1Node): NodeView {
  return {
    name: node.metadata?.name ?? '',
    uid: node.metadata?.uid ?? '',
    resourceVersion: node.metadata?.resourceVersion ?? '',
    labels: node.metadata?.labels ?? {},
    annotations: node.metadata?.annotations ?? {},
    unschedulable: node.spec?.unschedulable === true,
  };
}

/** Permanent failures become NodeAccessError; undefined means "transient, retry". */
function asNodeAccessError(error: unknown, node: string, verb: string): NodeAccessError | undefined {
  const status = apiStatusCode(error) ?? watchStatusCode(error);
  const problem = permanentProblem(status);
  if (problem === undefined) return undefined;
  return new NodeAccessError({ node, verb, resource: 'nodes', problem, status, reason: apiErrorMessage(error) }, error);
}

function permanentProblem(status: number | undefined): NodeAccessProblem | undefined {
  switch (status) {
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not-found';
    case 400:
    case 422:
      return 'invalid';
    default:
      return undefined;
  }
}

/** client-node's Watch reports a non-200 answer as an Error with `statusCode`. */
function watchStatusCode(error: unknown): number | undefined {
  const code = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** Rejects with the abort reason as soon as `signal` aborts; the request itself is left to finish. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(abortReason(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(toError(error));
      },
    );
  });
}

/** A push-to-pull bridge: callbacks push events, `for await` pulls them in order. */
class EventQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private finished = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  push(item: T): void {
    if (this.finished) return;
    this.items.push(item);
    this.notify();
  }

  end(): void {
    this.finished = true;
    this.notify();
  }

  fail(error: Error): void {
    if (this.finished) return;
    this.failure = error;
    this.finished = true;
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.finished) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }
}
