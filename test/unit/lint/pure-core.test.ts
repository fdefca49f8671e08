import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { PURE_CORE } from '../../../lint/pure-core.ts';

const ROOT = resolve(import.meta.dirname, '../../..');

describe('PURE_CORE (the pure files, named in one place)', () => {
  it.each(PURE_CORE.map((entry) => ({ entry })))('names $entry, which exists', ({ entry }) => {
    const path = resolve(ROOT, entry);
    expect(existsSync(path)).toBe(true);
    expect(statSync(path).isDirectory()).toBe(entry.endsWith('/'));
  });
});

describe('eslint.config.ts holds the pure core pure', () => {
  // The project's own configuration, typed linting included, on planted files: what `npm run lint` does.
  const eslint = new ESLint({ cwd: ROOT });

  async function findings(file: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: resolve(ROOT, file) });
    return (result?.messages ?? []).map((m) => `${m.ruleId ?? 'parse'}: ${m.message}`);
  }

  const PURE_FILE = 'agent/kernel/plan/decide-reload.ts';
  const EFFECT_FILE = 'agent/kernel/reload-driver.ts';

  it.each([
    { rule: 'no-restricted-globals', what: 'Date', code: 'export const at = (): number => Date.now();\n' },
    { rule: 'no-restricted-globals', what: 'performance', code: 'export const at = (): number => performance.now();\n' },
    { rule: 'no-restricted-globals', what: 'setTimeout', code: 'export function later(f: () => void): void {\n  setTimeout(f, 1);\n}\n' },
    { rule: 'no-restricted-globals', what: 'setInterval', code: 'export function every(f: () => void): void {\n  setInterval(f, 1);\n}\n' },
    { rule: 'no-restricted-properties', what: 'Math.random', code: 'export const pick = (): number => Math.random();\n' },
    {
      rule: 'boundaries/imports',
      what: 'a reader',
      code: "import { readLoadedModule } from '../../../shared/kmod/read-loaded-module.ts';\nexport const read = readLoadedModule;\n",
    },
  ])('reports $what planted in a decider ($rule), and lets an effect module use it', async ({ rule, what, code }) => {
    expect(await findings(PURE_FILE, code)).toEqual([expect.stringMatching(new RegExp(`^${rule}: .*(${what === 'a reader' ? 'must not import' : what})`))]);
    expect(await findings(EFFECT_FILE, code.replace('../../../shared', '../../shared'))).toEqual([]);
  }, 120_000);

  it('reports a clock read in a pure shared/ file and in the policy', async () => {
    expect(await findings('shared/backoff.ts', 'export const seed = (): number => Math.random() + Date.now();\n')).toEqual([
      expect.stringMatching(/^no-restricted-properties: .*Math\.random/),
      expect.stringMatching(/^no-restricted-globals: .*Date/),
    ]);
    expect(await findings('coordinator/policy/label-selector.ts', 'export const at = (): number => performance.now();\n')).toEqual([
      expect.stringMatching(/^no-restricted-globals: .*performance/),
    ]);
  }, 120_000);

  it('reports cli/ importing a program', async () => {
    expect(await findings('cli/render-status.ts', "export { createReconciler } from '../coordinator/reconcile/reconciler.ts';\n")).toEqual([
      expect.stringContaining('cli/render-status.ts must not import coordinator/reconcile/reconciler.ts'),
    ]);
  }, 120_000);
});
