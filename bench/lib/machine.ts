import { cpus, freemem, hostname, loadavg, totalmem } from 'node:os';

/** The machine a benchmark ran on and how busy it was: figures are only comparable on the same, equally quiet, machine. */
export interface MachineInfo {
  readonly host: string;
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly freeMemoryGiB: number;
  /** 1, 5 and 15 minute load averages when the run started. */
  readonly loadAtStart: readonly number[];
  readonly node: string;
  readonly at: string;
}

export function describeMachine(): MachineInfo {
  const c = cpus();
  return {
    host: hostname(),
    cpu: c[0]?.model ?? 'unknown',
    cores: c.length,
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    freeMemoryGiB: round(freemem() / 2 ** 30, 1),
    loadAtStart: loadavg().map((l) => round(l, 2)),
    node: process.version,
    at: new Date().toISOString(),
  };
}

export function machineLine(m: MachineInfo): string {
  return `${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB (${m.freeMemoryGiB} free), load ${m.loadAtStart.join(' / ')} (1/5/15 min), Node ${m.node}, ${m.at}`;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
