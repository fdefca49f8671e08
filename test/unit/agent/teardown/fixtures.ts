import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { HolderCommand } from '../../../../agent/teardown/holder-command.ts';

/**
 * A real small daemon managed like a service: `daemonctl.sh start|stop|status <dir>` starts a
 * detached `sleep` that holds `<dir>/device` open (as nvidia-persistenced holds /dev/nvidia*),
 * with its pid in `<dir>/pid`; `stop` kills it and waits for it to be gone.
 */
export async function writeDaemonControl(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'device'), '');
  const script = join(dir, 'daemonctl.sh');
  await writeFile(
    script,
    `#!/bin/sh
dir=$2
case "$1" in
  start) setsid sh -c 'exec 3<"$1/device"; exec sleep 3600' sh "$dir" </dev/null >/dev/null 2>&1 & echo $! > "$dir/pid" ;;
  stop) pid=$(cat "$dir/pid") && kill "$pid" && while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done && rm -f "$dir/pid" ;;
  status) [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null ;;
esac
`,
    { mode: 0o755 },
  );
  return script;
}

export function aDaemonHolder(name: string, script: string, dir: string, over: Partial<HolderCommand> = {}): HolderCommand {
  return {
    name,
    on: 'image',
    check: [script, 'status', dir],
    stop: [script, 'stop', dir],
    start: [script, 'start', dir],
    timeoutMs: 30_000,
    ...over,
  };
}

