import { posix, relative, sep } from 'node:path';
import type { Rule } from 'eslint';
import { PURE_CORE } from './pure-core.ts';

/**
 * The architecture's import rules, checked on every import, export-from and dynamic import. A
 * relative specifier is resolved against the importing file and compared as a repository path
 * (`coordinator/plan/...`), so `../../agent/x.ts` is caught however many `..` it takes.
 */
export interface ImportBoundary {
  /** Files this boundary applies to: a repository folder (`coordinator/plan/`) or file. */
  readonly files: string;
  /** Why, for the message. */
  readonly because: string;
  /** When set, local imports must resolve inside one of these folders or files. */
  readonly mayImportOnly?: readonly string[];
  /** Local folders or files that must never be imported. */
  readonly mayNotImport?: readonly string[];
  /** Packages (and their subpaths) that must never be imported; `node:fs` also matches bare `fs`. */
  readonly forbiddenPackages?: readonly string[];
}

/** Node modules that reach the outside world: a pure module imports none of them. */
const NODE_IO_MODULES = [
  'node:fs',
  'node:child_process',
  'node:net',
  'node:http',
  'node:https',
  'node:http2',
  'node:dgram',
  'node:dns',
  'node:tls',
  'node:os',
  'node:process',
  'node:worker_threads',
  'node:cluster',
  'node:readline',
  'node:timers',
];

/** Packages that reach the outside world (API server, processes, network, files, metrics, logs). */
const IO_PACKAGES = ['@kubernetes/client-node', 'execa', 'undici', 'pino', 'prom-client', 'proper-lockfile', 'systeminformation', 'tar'];

/** Folders the images ship (Dockerfile.agent, Dockerfile.init), and the kubectl plugin. */
const PRODUCTION = ['agent/', 'coordinator/', 'init-container/', 'shared/', 'cli/'];

/**
 * Every boundary that applies to a file is checked (a file in coordinator/plan/ is held to the
 * pure core's rule, the planner's and coordinator/'s). demo/ and bench/ may import test/ (the test bed, the
 * fixtures and test/doubles/): they are development tools, and the images copy neither
 * (.dockerignore). Production folders never import test/, demo/ or bench/.
 */
export const BOUNDARIES: readonly ImportBoundary[] = [
  ...PURE_CORE.map((files) => ({
    files,
    because: 'the pure core (lint/pure-core.ts) imports only the pure core, and no I/O',
    mayImportOnly: PURE_CORE,
    forbiddenPackages: [...IO_PACKAGES, ...NODE_IO_MODULES, 'node:perf_hooks', 'node:crypto'],
  })),
  {
    files: 'coordinator/plan/',
    because: 'the planner is pure: it imports only its own files, coordinator/policy/, shared/keys.ts, the annotations\' schemas and the JSON Patch form, and no I/O',
    mayImportOnly: ['coordinator/plan/', 'coordinator/policy/', 'shared/keys.ts', 'shared/node-annotations.ts', 'shared/driver-identity.ts', 'shared/module-signature-verdict.ts', 'shared/kernel-signature-policy.ts', 'shared/kube/json-patch.ts'],
    forbiddenPackages: ['@kubernetes/client-node', 'execa', ...NODE_IO_MODULES],
  },
  { files: 'agent/', because: 'agent/ and coordinator/ are separate programs', mayNotImport: ['coordinator/', 'cli/'] },
  { files: 'coordinator/', because: 'agent/ and coordinator/ are separate programs', mayNotImport: ['agent/', 'cli/'] },
  {
    files: 'cli/',
    because: 'the kubectl plugin reads the cluster itself: it imports its own files, shared/ and the policy it shows, no program',
    mayImportOnly: ['cli/', 'shared/', 'coordinator/policy/'],
  },
  {
    files: 'init-container/',
    because: 'the init container imports only its own files and shared/',
    mayImportOnly: ['init-container/', 'shared/'],
  },
  {
    files: 'shared/',
    because: 'shared/ is used by every program and imports none of them',
    mayImportOnly: ['shared/'],
  },
  ...PRODUCTION.map((files) => ({
    files,
    because: 'production code never reaches test code (test doubles must not ship in an image)',
    mayNotImport: ['test/', 'demo/', 'bench/'],
  })),
];

function within(path: string, prefix: string): boolean {
  return prefix.endsWith('/') ? path.startsWith(prefix) : path === prefix;
}

function packageMatches(specifier: string, name: string): boolean {
  const candidates = name.startsWith('node:') ? [name, name.slice('node:'.length)] : [name];
  return candidates.some((c) => specifier === c || specifier.startsWith(`${c}/`));
}

/** What is wrong with importing `specifier` from `file` (a repository path), or undefined. */
export function boundaryViolation(file: string, specifier: string, boundaries: readonly ImportBoundary[] = BOUNDARIES): string | undefined {
  const local = specifier.startsWith('.') ? posix.normalize(posix.join(posix.dirname(file), specifier)) : undefined;
  for (const b of boundaries) {
    if (!within(file, b.files)) continue;
    if (local === undefined) {
      const banned = b.forbiddenPackages?.find((name) => packageMatches(specifier, name));
      if (banned !== undefined) return `${file} must not import ${specifier}: ${b.because}`;
      continue;
    }
    if (b.mayImportOnly !== undefined && !b.mayImportOnly.some((p) => within(local, p))) {
      return `${file} must not import ${local}: ${b.because}`;
    }
    if (b.mayNotImport?.some((p) => within(local, p)) === true) return `${file} must not import ${local}: ${b.because}`;
  }
  return undefined;
}

/** ESLint rule `boundaries/imports`: reports every import that crosses a boundary. */
export function importBoundariesRule(root: string, boundaries: readonly ImportBoundary[] = BOUNDARIES): Rule.RuleModule {
  return {
    meta: { type: 'problem', docs: { description: 'Enforces the import boundaries between the programs, shared/ and test/' }, schema: [] },
    create(context) {
      const file = relative(root, context.filename).split(sep).join('/');
      const check = (node: Rule.Node, source: unknown): void => {
        if (typeof source !== 'string') return;
        const message = boundaryViolation(file, source, boundaries);
        if (message !== undefined) context.report({ node, message });
      };
      return {
        ImportDeclaration: (node) => { check(node, node.source.value); },
        ExportAllDeclaration: (node) => { check(node, node.source.value); },
        ExportNamedDeclaration: (node) => { check(node, node.source?.value); },
        ImportExpression: (node) => { check(node, node.source.type === 'Literal' ? node.source.value : undefined); },
      };
    },
  };
}
