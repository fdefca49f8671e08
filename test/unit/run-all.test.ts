import { describe, expect, it } from 'vitest';
import { formatSummaryLine, LANES, parseSummaryLine } from '../run-all.ts';

describe('npm test in two lanes (test/run-all.ts)', () => {
  it("reads a lane's summary line, with or without skipped tests, and nothing else", () => {
    expect(parseSummaryLine('1875 passed, 1 failed, 6 skipped')).toEqual({ passed: 1875, failed: 1, skipped: 6 });
    expect(parseSummaryLine('  12 passed, 0 failed  ')).toEqual({ passed: 12, failed: 0, skipped: 0 });
    expect(parseSummaryLine('Tests  12 passed (12)')).toBeUndefined();
    expect(parseSummaryLine('main lane: 12 passed, 0 failed')).toBeUndefined();
  });

  it('writes the total as the plain line CI reads, skipped only when there are some', () => {
    expect(formatSummaryLine({ passed: 2228, failed: 0, skipped: 6 })).toBe('2228 passed, 0 failed, 6 skipped');
    expect(formatSummaryLine({ passed: 3, failed: 1, skipped: 0 })).toBe('3 passed, 1 failed');
  });

  it('runs every vitest project in exactly one lane, the type check and lint first in the main lane', () => {
    const vitestArgs = LANES.flatMap((lane) => lane.steps.filter((s) => s.command.endsWith('vitest')).map((s) => s.args));
    const included = vitestArgs.flatMap((args) => args.filter((a) => a.startsWith('--project=') && !a.startsWith('--project=!')).map((a) => a.slice('--project='.length)));
    const excluded = vitestArgs.flatMap((args) => args.filter((a) => a.startsWith('--project=!')).map((a) => a.slice('--project=!'.length)));
    expect(included.sort()).toEqual(excluded.sort());
    const main = LANES.find((lane) => lane.name === 'main');
    expect(main?.steps.map((s) => s.command.split('/').at(-1))).toEqual(['tsc', 'eslint', 'vitest']);
  });
});
