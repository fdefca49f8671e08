import { describe, expect, it } from 'vitest';
import { SlotPipeline } from '../../../../bench/lib/slot-pipeline.ts';

describe('SlotPipeline', () => {
  it('starts as many nodes as there are slots, in order', () => {
    const pipeline = new SlotPipeline(['a', 'b', 'c', 'd'], 2);
    expect(pipeline.start()).toEqual(['a', 'b']);
    expect(pipeline.isRunning('a')).toBe(true);
    expect(pipeline.isRunning('c')).toBe(false);
  });

  it('hands a freed slot to the next waiting node, whichever running node finished', () => {
    const pipeline = new SlotPipeline(['a', 'b', 'c', 'd'], 2);
    pipeline.start();
    expect(pipeline.done('b')).toBe('c');
    expect(pipeline.done('a')).toBe('d');
    expect(pipeline.running()).toEqual(['c', 'd']);
  });

  it('is finished once every node is done, and ignores nodes that are not running', () => {
    const pipeline = new SlotPipeline(['a', 'b', 'c'], 2);
    pipeline.start();
    expect(pipeline.done('c')).toBeUndefined();
    expect(pipeline.done('a')).toBe('c');
    expect(pipeline.done('a')).toBeUndefined();
    expect(pipeline.done('b')).toBeUndefined();
    expect(pipeline.finished()).toBe(false);
    expect(pipeline.done('c')).toBeUndefined();
    expect(pipeline.finished()).toBe(true);
  });

  it('starts the whole fleet when it has fewer nodes than slots', () => {
    expect(new SlotPipeline(['a', 'b'], 5).start()).toEqual(['a', 'b']);
  });

  it('refuses a slot count that is not a positive integer', () => {
    expect(() => new SlotPipeline(['a'], 0)).toThrow(/slots must be a positive integer, got 0/);
  });
});
