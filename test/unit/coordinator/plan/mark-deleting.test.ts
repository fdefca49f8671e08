import { describe, expect, it } from 'vitest';
import { markDeleting } from '../../../../coordinator/plan/mark-deleting.ts';

const pod = (uid: string, deleting = false) => ({ namespace: 'ns', name: uid, uid, deleting });

describe('markDeleting', () => {
  it('marks the pods whose uid is listed, and leaves the others as they are', () => {
    const others = pod('b');
    const marked = markDeleting([pod('a'), others, pod('c', true)], new Set(['a', 'c']));
    expect(marked.map((p) => p.deleting)).toEqual([true, false, true]);
    expect(marked[1]).toBe(others);
  });

  it('gives back the same array when nothing changes (a reused snapshot stays reused)', () => {
    const pods = [pod('a'), pod('b', true)];
    expect(markDeleting(pods, new Set())).toBe(pods);
    expect(markDeleting(pods, new Set(['b', 'z']))).toBe(pods);
  });

  it('never changes the array it was given', () => {
    const pods = [pod('a')];
    markDeleting(pods, new Map([['a', 1]]));
    expect(pods[0]?.deleting).toBe(false);
  });
});
