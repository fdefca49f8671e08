import { describe, expect, it } from 'vitest';
import { shortNodeName } from '../../chaos/short-node-name.ts';

describe('shortNodeName (the chaos summaries)', () => {
  it('keeps what follows the world id: a numbered node and the node added mid-rollout', () => {
    expect(shortNodeName('chaos-3f9a1c-01')).toBe('01');
    expect(shortNodeName('chaos-3f9a1c-new')).toBe('new');
  });

  it('keeps a name without a dash whole', () => {
    expect(shortNodeName('worker')).toBe('worker');
  });
});
