import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildInitramfs } from './build-initramfs.ts';
import { findTestKernel, type TestKernel } from './find-test-kernel.ts';
import { isReadable } from './is-readable.ts';
import { KernelTestBedError } from './kernel-test-bed-error.ts';

export interface GuestRun {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  /** Wall time from handing the command over to reading its exit code. */
  readonly durationMs: number;
}

/** A Linux guest booted under QEMU, running commands in a chroot of the host's own root. */
export interface Guest {
  readonly kernel: TestKernel;
  /**
   * Host temp dir shared read-write with the guest at the same path, uncached: files the host
   * writes after the boot belong here (or in `writableDirs`), since the guest may cache what it
   * has already read of the rest of the host's file system.
   */
  readonly workDir: string;
  /** QEMU's process id. */
  readonly pid: number;
  /** From starting QEMU to the guest accepting commands. */
  readonly bootMs: number;
  /**
   * Runs a POSIX sh script as root inside the guest (cwd /, PATH with /usr/sbin) and returns its
   * exit code and output. Commands run one at a time, in call order. Past `timeoutMs` the guest
   * is killed (its state is unknown) and the promise rejects.
   */
  run(script: string, options?: { readonly timeoutMs?: number }): Promise<GuestRun>;
  /**
   * Saves what the guest changed on its root file system to `diskDir` (BootOptions), so a guest
   * booted later with the same `diskDir` starts from it: a reboot of the same node. Fails
   * without a `diskDir`.
   */
  saveDisk(): Promise<void>;
  /** The last part of the serial console: the kernel log and the init script's markers. */
  consoleTail(): string;
  /** Powers the guest off (QEMU is killed by PID if it does not exit in time) and removes the work dir. */
  stop(): Promise<void>;
}

export interface BootOptions {
  /** The kernel to boot; default: findTestKernel()'s, the newest installed one. */
  readonly kernel?: TestKernel;
  /** Limit for the boot itself (QEMU start to DR-GUEST-READY). */
  readonly bootTimeoutMs?: number;
  /** The guest powers itself off after this long without a command: a backstop for a host that died. */
  readonly idleSeconds?: number;
  readonly memoryMiB?: number;
  readonly cpus?: number;
  /**
   * Host dirs (absolute, no commas or blanks) shared read-write at the same path in the guest,
   * created when missing: caches that should outlive the guest. Everything else the guest
   * writes outside the work dir stays in its memory.
   */
  readonly writableDirs?: readonly string[];
  /**
   * A host dir standing for the node's disk (absolute, no commas or blanks; created when
   * missing): the guest starts from what `saveDisk()` of an earlier guest left there.
   */
  readonly diskDir?: string;
  /** More kernel command line parameters (e.g. `module.sig_enforce=1`), after the bed's own. */
  readonly kernelParameters?: readonly string[];
}

const READY = 'DR-GUEST-READY';
const FAILED = 'DR-GUEST-FAILED:';
const CONSOLE_TAIL_CHARS = 16_000;

/**
 * Boots Debian's packaged kernel under QEMU with software emulation (TCG: /dev/kvm may exist
 * on CI machines and hang). Everything the bed needs is checked first and reported by name:
 * a test fails with the reason, it never skips.
 */
export async function bootGuest(options: BootOptions = {}): Promise<Guest> {
  const kernel = options.kernel ?? (await findTestKernel());
  const initramfs = await buildInitramfs(kernel);
  for (const dir of [...(options.writableDirs ?? []), ...(options.diskDir === undefined ? [] : [options.diskDir])]) {
    if (!isAbsolute(dir) || /[\s,]/.test(dir)) throw new KernelTestBedError(`cannot share ${dir} with the guest: it must be absolute, without blanks or commas`, { dir });
    await mkdir(dir, { recursive: true });
  }
  const workDir = await mkdtemp(join(tmpdir(), 'driver-rollout-kernel-'));
  await mkdir(join(workDir, 'commands'));
  const args = qemuArgs(kernel, initramfs, workDir, options);
  const started = performance.now();
  const qemu = spawn(kernel.qemu, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const pid = qemu.pid;
  if (pid === undefined) {
    await rm(workDir, { recursive: true, force: true });
    throw new KernelTestBedError(`could not start ${kernel.qemu}`, { qemu: kernel.qemu, args });
  }
  const guest = new RunningGuest(kernel, workDir, qemu, pid);
  try {
    await guest.waitForBoot(options.bootTimeoutMs ?? 90_000);
  } catch (error) {
    await guest.stop();
    throw error;
  }
  guest.bootMs = performance.now() - started;
  return guest;
}

function qemuArgs(kernel: TestKernel, initramfs: string, workDir: string, options: BootOptions): string[] {
  const writable = options.writableDirs ?? [];
  // no_timer_check: under heavy host load TCG misses the IO-APIC timer check, and the kernel
  // panics ("IO-APIC + timer doesn't work!") before init; seen on the shared 2-core machine.
  const cmdline = ['console=ttyS0', 'panic=-1', 'no_timer_check', `dr.work=${workDir}`, `dr.idle=${options.idleSeconds ?? 120}`];
  if (writable.length > 0) cmdline.push(`dr.rw=${writable.join(',')}`);
  if (options.diskDir !== undefined) cmdline.push(`dr.disk=${options.diskDir}`);
  cmdline.push(...(options.kernelParameters ?? []));
  // multidevs=remap: / spans several host devices; without it inode numbers can collide in the guest.
  const share = (path: string, tag: string, extra: string): string =>
    `local,path=${path},mount_tag=${tag},security_model=none,multidevs=remap${extra}`;
  return [
    ...['-accel', 'tcg', '-cpu', 'max', '-m', String(options.memoryMiB ?? 2048), '-smp', String(options.cpus ?? 1)],
    ...['-nographic', '-no-reboot', '-net', 'none'],
    ...['-kernel', kernel.image, '-initrd', initramfs, '-append', cmdline.join(' ')],
    ...['-virtfs', share('/', 'host', ',readonly=on'), '-virtfs', share(workDir, 'work', '')],
    ...writable.flatMap((dir, i) => ['-virtfs', share(dir, `rw${i}`, '')]),
    ...(options.diskDir === undefined ? [] : ['-virtfs', share(options.diskDir, 'disk', '')]),
  ];
}

class RunningGuest implements Guest {
  readonly kernel: TestKernel;
  readonly workDir: string;
  readonly pid: number;
  bootMs = 0;
  readonly #exited: Promise<void>;
  #exit: string | undefined;
  #console = '';
  #next = 1;
  #queue: Promise<unknown> = Promise.resolve();
  readonly #killOnExit = (): void => {
    this.#kill();
  };

  constructor(kernel: TestKernel, workDir: string, qemu: ChildProcess, pid: number) {
    this.kernel = kernel;
    this.workDir = workDir;
    this.pid = pid;
    const log = createWriteStream(join(workDir, 'console.log'));
    const append = (chunk: Buffer): void => {
      log.write(chunk);
      this.#console = (this.#console + chunk.toString('utf8')).slice(-CONSOLE_TAIL_CHARS);
    };
    qemu.stdout?.on('data', append);
    qemu.stderr?.on('data', append);
    this.#exited = new Promise((resolve) => {
      qemu.on('exit', (code, signal) => {
        this.#exit = signal === null ? `exit code ${code}` : `signal ${signal}`;
        log.end();
        process.off('exit', this.#killOnExit);
        resolve();
      });
    });
    // A runner that dies mid-test must not leave QEMU behind.
    process.on('exit', this.#killOnExit);
  }

  consoleTail(): string {
    return this.#console;
  }

  async saveDisk(): Promise<void> {
    const saved = await this.run('[ -d /run/dr-disk ] || { echo "booted without a diskDir" >&2; exit 1; }; sync; rm -rf /run/dr-disk-share/upper && mkdir /run/dr-disk-share/upper && cp -a /run/dr-disk/. /run/dr-disk-share/upper/', { timeoutMs: 300_000 });
    if (saved.exitCode !== 0) throw this.#error(`saving the guest's disk failed: ${saved.stderr}`);
  }

  async waitForBoot(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!this.#console.includes(READY)) {
      const failure = this.#console.split('\n').find((l) => l.includes(FAILED));
      if (failure !== undefined) throw this.#error(`guest init failed: ${failure.slice(failure.indexOf(FAILED) + FAILED.length).trim()}`);
      if (this.#exit !== undefined) throw this.#error(`QEMU ended during boot (${this.#exit})`);
      if (performance.now() > deadline) throw this.#error(`guest did not boot within ${timeoutMs / 1000}s`);
      await sleep(50);
    }
  }

  run(script: string, options: { readonly timeoutMs?: number } = {}): Promise<GuestRun> {
    const result = this.#queue.then(() => this.#runNow(script, options.timeoutMs ?? 120_000));
    this.#queue = result.catch(() => undefined);
    return result;
  }

  async #runNow(script: string, timeoutMs: number): Promise<GuestRun> {
    const ended = this.#exit;
    if (ended !== undefined) throw this.#error(`the guest is not running (QEMU ended: ${ended})`);
    const n = this.#next++;
    const base = join(this.workDir, 'commands', String(n));
    const started = performance.now();
    await writeFile(`${base}.sh.tmp`, script);
    await rename(`${base}.sh.tmp`, `${base}.sh`);
    const deadline = started + timeoutMs;
    while (!(await isReadable(`${base}.rc`))) {
      const exit = this.#exitStatus();
      if (exit !== undefined) throw this.#error(`QEMU ended while running command ${n} (${exit})`, await readOutputs(base));
      if (performance.now() > deadline) {
        this.#kill();
        await this.#exited;
        throw this.#error(`guest command ${n} did not finish within ${timeoutMs / 1000}s; QEMU (pid ${this.pid}) killed`, await readOutputs(base));
      }
      await sleep(25);
    }
    const durationMs = performance.now() - started;
    const exitCode = Number.parseInt(await readFile(`${base}.rc`, 'utf8'), 10);
    return { exitCode, durationMs, ...(await readOutputs(base)) };
  }

  async stop(): Promise<void> {
    if (this.#exit === undefined) {
      await writeFile(join(this.workDir, 'commands', 'poweroff'), '').catch(() => undefined);
      const ended = await Promise.race([this.#exited.then(() => true), sleep(5_000, false, { ref: false })]);
      if (!ended) this.#kill();
      await this.#exited;
    }
    await rm(this.workDir, { recursive: true, force: true });
  }

  /** A method, not the field: TypeScript would keep the field narrowed across awaits. */
  #exitStatus(): string | undefined {
    return this.#exit;
  }

  #kill(): void {
    if (this.#exit !== undefined) return;
    try {
      process.kill(this.pid, 'SIGKILL');
    } catch {
      // Already gone: the exit event is on its way.
    }
  }

  #error(message: string, outputs: Partial<Record<'stdout' | 'stderr', string>> = {}): KernelTestBedError {
    return new KernelTestBedError(`${message}\n--- guest console (tail) ---\n${this.#console.slice(-4_000)}`, {
      pid: this.pid,
      kernel: this.kernel.version,
      workDir: this.workDir,
      ...outputs,
    });
  }
}

async function readOutputs(base: string): Promise<{ stdout: string; stderr: string }> {
  const read = (path: string): Promise<string> => readFile(path, 'utf8').catch(() => '');
  return { stdout: await read(`${base}.out`), stderr: await read(`${base}.err`) };
}
