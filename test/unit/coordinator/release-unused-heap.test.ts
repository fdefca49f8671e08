import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { releaseUnusedHeap } from '../../../coordinator/release-unused-heap.ts';

const MB = 2 ** 20;

/** An ordinary full GC, as V8 runs on its own: it frees the objects but keeps their pages. */
function ordinaryGc(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** About `mb` MB in arrays of 64 small integers (about 0.5 kB each), alive long enough to reach the old generation, then dropped. */
function allocateAndDrop(mb: number): void {
  const kept: number[][] = [];
  for (let i = 0; kept.length * 528 < mb * MB; i++) kept.push(new Array<number>(64).fill(i));
  ordinaryGc(); // promotes them
  expect(kept.length).toBeGreaterThan(0);
  kept.length = 0;
}

describe('releaseUnusedHeap', () => {
  it('returns to the OS the pages an ordinary GC keeps after a burst of allocation', () => {
    allocateAndDrop(120);
    ordinaryGc();
    const before = process.memoryUsage.rss();
    releaseUnusedHeap();
    const after = process.memoryUsage.rss();
    expect((before - after) / MB).toBeGreaterThan(40);
  });

  it('can run again', () => {
    releaseUnusedHeap();
    releaseUnusedHeap();
  });
});
