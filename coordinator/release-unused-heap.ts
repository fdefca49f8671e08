import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** What `gc` from V8's gc extension accepts (Node 24). */
type GcFunction = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let gc: GcFunction | undefined;

/**
 * Gives back to the OS the heap pages V8 keeps after a burst of allocation, here the informers'
 * initial lists, by one full, memory-reducing garbage collection (a "last-resort" GC).
 *
 * V8 quirk: while the caches fill, V8 lets the old generation grow to several times what stays
 * alive (its heap growing factor), and the pages an ordinary GC frees afterwards stay in its page
 * pool, resident, until a memory-reducing GC; an idle process may never run one
 * (docs/decisions/0005-coordinator-memory.md). Takes one GC pause (tens to a few hundred ms); call it once, after the caches sync.
 * The gc function is reached through V8's gc extension, enabled at run time, so the program
 * needs no `--expose-gc` flag.
 */
export function releaseUnusedHeap(): void {
  if (gc === undefined) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as GcFunction;
  }
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
