import { execa } from 'execa';
import { buildEnvironment } from './run-build-command.ts';

/**
 * `gcc --version`'s first line in the build environment (e.g. `gcc (Debian 12.2.0-14+deb12u1)
 * 12.2.0`): part of the cache key, so a new compiler in the image rebuilds. The kernel's own
 * CC (CONFIG_CC_VERSION_TEXT) follows from the kernel release, which is in the key already.
 * `none` when there is no gcc (then only a cache hit or prebuilt modules can work).
 */
export async function readCompilerVersion(home: string): Promise<string> {
  const result = await execa('gcc', ['--version'], { reject: false, extendEnv: false, env: buildEnvironment(home) });
  return result.exitCode === 0 ? (result.stdout.split('\n', 1)[0] ?? '').trim() : 'none';
}
