import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { describeCommandFailure } from '../../../../agent/build/describe-command-failure.ts';

describe('describeCommandFailure (real execa results)', () => {
  it('names a missing binary (an image without kmod or build-essential)', async () => {
    const result = await execa('driver-rollout-no-such-tool', ['x'], { reject: false });
    expect(describeCommandFailure(result)).toMatch(/ENOENT/);
  });

  it("uses the tool's own stderr when it wrote any", async () => {
    const result = await execa('sh', ['-c', 'echo "modprobe: FATAL: Module x not found" >&2; exit 1'], { reject: false });
    expect(describeCommandFailure(result)).toBe('modprobe: FATAL: Module x not found');
  });

  it('says a command timed out', async () => {
    const result = await execa('sleep', ['5'], { reject: false, timeout: 50 });
    expect(describeCommandFailure(result, 50)).toBe('timed out after 50 ms');
  });

  it('says when a failing tool wrote nothing', async () => {
    const result = await execa('false', [], { reject: false });
    expect(describeCommandFailure(result)).toBe('(no output)');
  });
});
