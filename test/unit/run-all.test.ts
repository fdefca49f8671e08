import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { formatSummaryLine, LANES, NODES_LANE_FILES, parseSummaryLine } from '../run-all.ts';

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

  it('runs every vitest project in exactly one lane, the type check and lint first in the main lane as gates', () => {
    const vitestArgs = (name: string) => LANES.find((lane) => lane.name === name)?.steps.filter((s) => s.command.endsWith('vitest')).flatMap((s) => s.args) ?? [];
    const projects = (args: readonly string[], prefix: string) => args.filter((a) => a.startsWith(prefix)).map((a) => a.slice(prefix.length));
    const nodesProjects = projects(vitestArgs('nodes'), '--project=').filter((p) => !p.startsWith('!'));
    // The main lane runs every project but the nodes lane's own; integration is split by file.
    expect(projects(vitestArgs('main'), '--project=!').sort()).toEqual(nodesProjects.filter((p) => p !== 'integration').sort());
    const main = LANES.find((lane) => lane.name === 'main');
    expect(main?.steps.map((s) => [s.command.split('/').at(-1), s.gate ?? false])).toEqual([['tsc', true], ['eslint', true], ['vitest', false]]);
  });

  it('runs the integration files of the nodes lane there, and excludes each from the main lane', () => {
    expect(NODES_LANE_FILES.length).toBeGreaterThan(0);
    const nodes = LANES.find((lane) => lane.name === 'nodes')?.steps ?? [];
    const integration = nodes.find((s) => s.args.includes('--project=integration'));
    expect(integration?.args.filter((a) => !a.startsWith('-') && a !== 'run')).toEqual(NODES_LANE_FILES);
    const main = LANES.find((lane) => lane.name === 'main')?.steps.at(-1);
    expect(main?.args.filter((a) => a.startsWith('--exclude='))).toEqual(NODES_LANE_FILES.map((f) => `--exclude=${f}`));
    for (const file of NODES_LANE_FILES) expect(existsSync(join(import.meta.dirname, '..', '..', file)), file).toBe(true);
  });
});
