import { setTimeout as sleep } from 'node:timers/promises';
import type { RolloutView } from './rollout-view.ts';

/** Clears a terminal from the top-left corner: each frame replaces the last. */
const HOME_AND_CLEAR = '\x1b[H\x1b[J';
const INTERVAL_MS = 1_000;

export interface WatchOptions {
  readonly read: () => Promise<RolloutView[]>;
  readonly render: (views: readonly RolloutView[]) => string[];
  readonly write: (text: string) => void;
  /** Redraw in place (a terminal); else append each changed frame after a blank line. */
  readonly redraw: boolean;
  readonly signal: AbortSignal;
  /** Lines printed above each frame (e.g. the demo's phase). */
  readonly header?: () => string[];
}

/**
 * `status -w`: reads and renders once a second until `signal` aborts. A terminal is redrawn
 * whenever the frame changes (times in state tick); elsewhere (a log, a pipe) a frame is appended
 * only when a rollout or node changed apart from those times. A failed read is shown and retried.
 */
export async function watchStatus(options: WatchOptions): Promise<void> {
  let last: string | undefined;
  while (!options.signal.aborted) {
    let lines: string[];
    let key: string;
    try {
      const views = await options.read();
      lines = options.render(views);
      key = options.redraw ? lines.join('\n') : JSON.stringify(views.map((v) => ({ ...v, nodes: v.nodes.map((n) => ({ ...n, secondsInState: null })) })));
    } catch (error) {
      lines = [`(read failed, retrying: ${error instanceof Error ? error.message : String(error)})`];
      key = lines.join('\n');
    }
    if (key !== last) {
      const frame = [...(options.header?.() ?? []), ...lines].join('\n');
      options.write(options.redraw ? `${HOME_AND_CLEAR}${frame}\n` : `${last === undefined ? '' : '\n'}${frame}\n`);
      last = key;
    }
    try {
      await sleep(INTERVAL_MS, undefined, { signal: options.signal });
    } catch {
      return;
    }
  }
}
