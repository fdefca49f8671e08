import { describe, expect, it } from 'vitest';
import { compileLabelSelector, matchesSelector, parseLabelSelector } from '../../../../coordinator/policy/label-selector.ts';

const labels = { app: 'web', tier: 'frontend', 'example.com/zone': 'a' };

describe('label selectors', () => {
  it.each([
    ['', true],
    ['app=web', true],
    ['app==web', true],
    ['app!=web', false],
    ['app!=db', true],
    ['missing!=x', true],
    ['app in (web,api)', true],
    ['app in (db)', false],
    ['app notin (db, cache)', true],
    ['missing notin (x)', true],
    ['tier', true],
    ['!tier', false],
    ['!missing', true],
    ['app=web,tier=frontend', true],
    ['app=web,tier=backend', false],
    ['example.com/zone in (a,b),!legacy', true],
  ] as const)('"%s" matches: %s', (text, expected) => {
    const parsed = parseLabelSelector(text);
    if (!parsed.ok) throw new Error(parsed.message);
    expect(matchesSelector(parsed.selector, labels)).toBe(expected);
  });

  it.each(['app in (a', 'a b=c', 'app=web,', '=x', 'app in ()', 'app=not valid'])('rejects "%s"', (text) => {
    expect(parseLabelSelector(text).ok).toBe(false);
  });

  it('compiles matchLabels and matchExpressions like Kubernetes', () => {
    const compiled = compileLabelSelector({
      matchLabels: { app: 'web' },
      matchExpressions: [
        { key: 'tier', operator: 'In', values: ['frontend', 'edge'] },
        { key: 'legacy', operator: 'DoesNotExist' },
      ],
    });
    if (!compiled.ok) throw new Error(compiled.message);
    expect(compiled.selector.text).toBe('app=web,tier in (frontend,edge),!legacy');
    expect(matchesSelector(compiled.selector, labels)).toBe(true);
    expect(matchesSelector(compiled.selector, { ...labels, legacy: 'true' })).toBe(false);
  });

  it('rejects In without values and Exists with values', () => {
    expect(compileLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }).ok).toBe(false);
    expect(compileLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }).ok).toBe(false);
  });
});
