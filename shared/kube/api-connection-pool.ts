import { Agent, type Dispatcher } from 'undici';

/** TLS and socket options for each new connection (CA, client certificate, TCP keep-alive). */
export type ApiConnectOptions = Exclude<NonNullable<Agent.Options['connect']>, (...args: never[]) => unknown>;

/** Sizes and timeouts of one program's connections to the API server. */
export interface ApiConnectionPoolOptions {
  /** Keep-alive connections shared by ordinary requests (lists, gets, patches, evictions, Events). */
  readonly requestConnections: number;
  /** Keep-alive connections for Lease reads and renewals, so a renewal never queues behind writes. */
  readonly leaseConnections: number;
  /**
   * Longest wait for an ordinary request's response headers, and between chunks of its body.
   * client-node passes no AbortSignal, so without this a hung request would hold a pooled
   * connection forever.
   */
  readonly requestTimeoutMs: number;
  /**
   * How long an idle connection stays open. Below kube-apiserver's idle timeout (90 s), so
   * the client closes first and never sends on a connection the server is closing.
   */
  readonly keepAliveMs: number;
}

export const DEFAULT_API_CONNECTION_POOL: ApiConnectionPoolOptions = {
  requestConnections: 8,
  leaseConnections: 1,
  requestTimeoutMs: 30_000,
  keepAliveMs: 60_000,
};

/** Which of the pool's parts a request goes to. */
export type ApiTrafficClass = 'watch' | 'lease' | 'request';

/**
 * A watch holds its HTTP/1.1 connection for as long as it streams, so watches cannot share a
 * bounded pool with requests (enough watches would starve every request); Lease traffic gets
 * its own connection so that a burst of writes cannot delay a renewal past the renew deadline.
 */
export function classifyApiRequest(path: string): ApiTrafficClass {
  const q = path.indexOf('?');
  const query = new URLSearchParams(q === -1 ? '' : path.slice(q + 1));
  const watch = query.get('watch');
  if (watch === 'true' || watch === '1') return 'watch';
  if (path.startsWith('/apis/coordination.k8s.io/')) return 'lease';
  return 'request';
}

export interface ApiConnectionPool {
  /** One dispatcher for every request of the program: routes to the part `classifyApiRequest` names. */
  readonly dispatcher: Dispatcher;
  /** Closes every connection once the requests in flight have finished. */
  close(): Promise<void>;
}

/**
 * Keep-alive connections to one API server for all of a program's traffic: a bounded pool for
 * requests, one for Leases, and one connection per open watch (reused when a watch ends and
 * the informer starts the next). `connect` carries the TLS material (CA, client certificate).
 */
export function createApiConnectionPool(connect: ApiConnectOptions, options: ApiConnectionPoolOptions = DEFAULT_API_CONNECTION_POOL): ApiConnectionPool {
  const common = { connect, keepAliveTimeout: options.keepAliveMs, keepAliveMaxTimeout: options.keepAliveMs };
  const requests = new Agent({ ...common, connections: options.requestConnections, headersTimeout: options.requestTimeoutMs, bodyTimeout: options.requestTimeoutMs });
  const leases = new Agent({ ...common, connections: options.leaseConnections, headersTimeout: options.requestTimeoutMs, bodyTimeout: options.requestTimeoutMs });
  // A watch's body may be silent for minutes (client-node's Watch has its own inactivity timer).
  const watches = new Agent({ ...common, headersTimeout: options.requestTimeoutMs, bodyTimeout: 0 });
  const route = (dispatch: Dispatcher.Dispatch): Dispatcher.Dispatch => (opts, handler) => {
    switch (classifyApiRequest(opts.path)) {
      case 'watch':
        return watches.dispatch(opts, handler);
      case 'lease':
        return leases.dispatch(opts, handler);
      default:
        return dispatch(opts, handler);
    }
  };
  return {
    dispatcher: requests.compose(route),
    async close() {
      await Promise.all([requests.close(), leases.close(), watches.close()]);
    },
  };
}
