import eslint from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';
import { importBoundariesRule } from './lint/import-boundaries.ts';
import { IMPURE_GLOBALS, IMPURE_PROPERTIES, pureCoreGlobs } from './lint/pure-core.ts';

/** Only main.ts files and the test bed may end the process or read the environment. */
const PROCESS_PROPERTIES = [
  { object: 'process', property: 'exit', message: 'Only main.ts exits the process.' },
  { object: 'process', property: 'env', message: 'Only config.ts and main.ts read the environment.' },
];

export const config = defineConfig(
  { ignores: ['node_modules/**', 'coverage/**'] },
  eslint.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      complexity: ['error', 20],
      'max-depth': ['error', 4],
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'No enums: use string-literal unions (erasable syntax only).' },
        { selector: 'ExportDefaultDeclaration', message: 'No default exports.' },
      ],
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      '@typescript-eslint/only-throw-error': 'error',
      // @kubernetes/client-node models are classes with only data fields; object literals are
      // the idiomatic (and serialised-identical) way to build them.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The architecture's import rules (lint/import-boundaries.ts: BOUNDARIES); proven by
    // test/unit/lint/import-boundaries.test.ts on planted bad imports.
    files: ['**/*.ts'],
    plugins: { boundaries: { rules: { imports: importBoundariesRule(import.meta.dirname) } } },
    rules: { 'boundaries/imports': 'error' },
  },
  {
    files: ['agent/**/*.ts', 'init-container/**/*.ts', 'coordinator/**/*.ts', 'shared/**/*.ts'],
    ignores: ['**/main.ts', '**/config.ts'],
    rules: { 'no-restricted-properties': ['error', ...PROCESS_PROPERTIES] },
  },
  {
    // The pure core (lint/pure-core.ts) reads no clock, timer or random source; proven by
    // test/unit/lint/pure-core.test.ts on planted files. This block's no-restricted-properties
    // replaces the one above for these files, so it repeats the process rules.
    files: pureCoreGlobs(),
    rules: {
      'no-restricted-globals': ['error', ...IMPURE_GLOBALS],
      'no-restricted-properties': ['error', ...PROCESS_PROPERTIES, ...IMPURE_PROPERTIES],
    },
  },
);

// eslint's flat-config loader needs a default export; this is the one allowed.
// eslint-disable-next-line no-restricted-syntax
export default config;
