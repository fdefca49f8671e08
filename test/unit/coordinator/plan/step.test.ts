/** The step timers (step.ts readTimer): their start lives on the node, read by its one schema. */
import { describe, expect, it } from 'vitest';
import { KEYS, NOW, aCluster, aNode, aPod, aPolicy, actionsOf, annotationWrites, planAt, reasonOf, secondsAgo } from './fixtures.ts';

const DRAIN = { drain: { enable: true, timeoutSeconds: 300 } } as const;

const planWithDrainStart = (start: string) =>
  planAt(aCluster([aNode('n1').inState('drain-required').outdated().cordoned().annotated({ [KEYS.drainStartTime]: start }).with(aPod('web'))]), aPolicy(DRAIN));

const warnings = (plan: ReturnType<typeof planAt>) => actionsOf(plan, 'n1').flatMap((a) => (a.kind === 'emitEvent' && a.type === 'Warning' ? [a.message] : []));

describe('readTimer', () => {
  it('reads a recorded start and writes nothing', () => {
    const plan = planWithDrainStart(secondsAgo(60));
    expect(annotationWrites(plan, 'n1')[KEYS.drainStartTime]).toBeUndefined();
    expect(reasonOf(plan, 'n1')?.detail).toMatch(/\(60s of 300s\)/);
    expect(warnings(plan)).toEqual([]);
  });

  it.each(['soon', '1.7e9', ''])('starts afresh on a start that is not unix seconds (%j), with a Warning naming the node and the annotation', (start) => {
    const plan = planWithDrainStart(start);
    expect(annotationWrites(plan, 'n1')[KEYS.drainStartTime]).toBe(String(Math.floor(NOW / 1000)));
    expect(reasonOf(plan, 'n1')?.code).toBe('waiting-for-eviction');
    expect(warnings(plan)).toEqual([`node/n1: annotation ${KEYS.drainStartTime} is not unix seconds: ${JSON.stringify(start)}; the timer starts afresh`]);
  });
});
