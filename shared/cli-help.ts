/** True when the command line asks for usage (`--help` or `-h`): the program prints it and exits 0. */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/**
 * The `--help` text of a program: what it is, how it is started, and its settings, one per line.
 * Exit codes are part of the text because operators read them in `kubectl describe pod`.
 */
export function usageText(u: { command: string; summary: string; settings: readonly string[]; exitCodes: string; readme: string }): string {
  return `${u.summary}

Usage: ${u.command}

Settings:
${u.settings.map((s) => `  ${s}`).join('\n')}

Exit codes: ${u.exitCodes}
More: ${u.readme}
`;
}
