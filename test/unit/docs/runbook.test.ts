import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REASONS, STEP_REASONS } from '../../../agent/describe-failure.ts';
import { DRIVER_PHASES } from '../../../agent/report/driver-state.ts';
import { DRIVER_LOADED_EVENT, NEXT_KERNEL_BUILD_FAILED_EVENT, NEXT_KERNEL_MODULES_REFUSED_EVENT, NEXT_KERNEL_READY_EVENT } from '../../../agent/report/node-events.ts';
import { REASON_CODES } from '../../../coordinator/plan/action.ts';
import { AGENT_PROGRESS_REASONS, REBOOT_REQUIRED_REASON } from '../../../coordinator/plan/driver-failure.ts';
import { ROLLOUT_EVENT_REASONS } from '../../../coordinator/reconcile/reconcile-pass.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES } from '../../../init-container/exit-codes.ts';
import { upgradeEventReason } from '../../../shared/keys.ts';

/**
 * docs/runbook.md has one entry for every reason the agent, the init container and the coordinator
 * report, and no entry for a reason that does not exist. The reasons come from the code: its
 * tables and constants, plus every `reason: '<CamelCase>'` literal in the programs' sources (the
 * DriverRollout's condition reasons, and whatever is added later without a table). An entry is a
 * `### ` heading naming its reasons in backticks, with **Means:**, **Check:** and **Do:** parts.
 */

const ROOT = join(import.meta.dirname, '../../..');
const RUNBOOK = readFileSync(join(ROOT, 'docs/runbook.md'), 'utf8');

/** How the runbook names an init container exit code (what `kubectl describe pod` shows as Exit Code). */
const exitCodeName = (code: number): string => `exit code ${code}`;

interface Entry {
  readonly names: readonly string[];
  readonly heading: string;
  readonly body: string;
}

/** The `### ` entries: the backticked names of each heading and the text up to the next heading. */
function runbookEntries(markdown: string): Entry[] {
  const entries: Entry[] = [];
  let current: { heading: string; names: string[]; lines: string[] } | undefined;
  const close = () => {
    if (current !== undefined) entries.push({ names: current.names, heading: current.heading, body: current.lines.join('\n') });
    current = undefined;
  };
  for (const line of markdown.split('\n')) {
    if (line.startsWith('### ')) {
      close();
      current = { heading: line, names: [...line.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? ''), lines: [] };
    } else if (line.startsWith('## ') || line.startsWith('# ')) {
      close();
    } else {
      current?.lines.push(line);
    }
  }
  close();
  return entries;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(ROOT, dir, f));
}

/** Every `reason: '<CamelCase>'` literal in the programs (lower-case texts are log and metric fields, not reasons). */
function reasonLiterals(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of ['agent', 'coordinator', 'init-container'].flatMap(sourceFiles)) {
    for (const m of readFileSync(file, 'utf8').matchAll(/\breason: '([A-Z][A-Za-z]+)'/g)) {
      if (m[1] !== undefined) found.set(m[1], file.slice(ROOT.length + 1));
    }
  }
  return found;
}

function alertNames(): string[] {
  const rules = readFileSync(join(ROOT, 'charts/driver-rollout/templates/prometheusrule.yaml'), 'utf8');
  return [...rules.matchAll(/^\s*- alert: (\w+)/gm)].map((m) => m[1] ?? '');
}

/** Where each reason comes from, for the failure message. */
const reported = new Map<string, string>();
const add = (where: string, names: Iterable<string>) => {
  for (const name of names) if (!reported.has(name)) reported.set(name, where);
};
add('agent/describe-failure.ts REASONS', REASONS.map(([, reason]) => reason));
add('agent/describe-failure.ts STEP_REASONS', Object.values(STEP_REASONS));
add('agent/report/driver-state.ts DRIVER_PHASES', DRIVER_PHASES);
add('agent/report/node-events.ts', [DRIVER_LOADED_EVENT, NEXT_KERNEL_BUILD_FAILED_EVENT, NEXT_KERNEL_MODULES_REFUSED_EVENT, NEXT_KERNEL_READY_EVENT]);
add('coordinator/plan/driver-failure.ts', [...AGENT_PROGRESS_REASONS, REBOOT_REQUIRED_REASON]);
add('coordinator/plan/action.ts REASON_CODES', REASON_CODES);
add('coordinator/reconcile/reconcile-pass.ts ROLLOUT_EVENT_REASONS', ROLLOUT_EVENT_REASONS);
add('shared/keys.ts upgradeEventReason (driver gpu)', [upgradeEventReason('gpu')]);
add('init-container/exit-codes.ts', [
  ...Object.entries(EXIT_CODES).filter(([name]) => name !== 'ok').map(([, code]) => exitCodeName(code)),
  ...Object.values(SIGNAL_EXIT_CODES).map(exitCodeName),
]);
add('charts/driver-rollout/templates/prometheusrule.yaml', alertNames());
for (const [reason, file] of reasonLiterals()) add(`a reason literal in ${file}`, [reason]);

describe('docs/runbook.md', () => {
  const entries = runbookEntries(RUNBOOK);
  const documented = entries.flatMap((e) => e.names);

  it('reads the reasons from the code', () => {
    // Guards the readers above: an empty or tiny set would make the checks below pass vacuously.
    expect(reported.size).toBeGreaterThan(60);
    expect(reported.get('ModuleConfigInvalid')).toBe('agent/describe-failure.ts REASONS');
    expect(reported.get('FailureBudgetReached')).toMatch(/coordinator\/plan\/rollout-status\.ts$/);
    expect(reported.get('DriverRolloutHalted')).toBe('charts/driver-rollout/templates/prometheusrule.yaml');
  });

  it('has an entry for every reason the agent, the init container and the coordinator report', () => {
    const missing = [...reported].filter(([name]) => !documented.includes(name)).map(([name, where]) => `${name} (${where})`);
    expect(missing).toEqual([]);
  });

  it('has no entry for a reason that does not exist', () => {
    expect(documented.filter((name) => !reported.has(name))).toEqual([]);
  });

  it('has one entry per reason', () => {
    expect(documented.filter((name, i) => documented.indexOf(name) !== i)).toEqual([]);
  });

  it('says in every entry what it means, what to check and what to do', () => {
    const incomplete = entries
      .filter((e) => !['**Means:**', '**Check:**', '**Do:**'].every((part) => e.body.includes(part)))
      .map((e) => e.heading);
    expect(incomplete).toEqual([]);
  });

  it('names at least one reason in every entry heading', () => {
    expect(entries.filter((e) => e.names.length === 0).map((e) => e.heading)).toEqual([]);
  });
});
