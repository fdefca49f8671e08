/**
 * The leader's alert gate polls: one loop per DriverRollout with a gate, asking Prometheus every
 * `intervalSeconds` (the first time at once) and keeping the last reading for the passes. A
 * reading that changes the gate's result (another set of firing alert names, another problem,
 * answered ↔ unanswered) wakes the loop (`onChange`); the same result again wakes nothing.
 *
 * Memory only: a new leader asks afresh and, until its first answer, the gate holds (no
 * reading: plan/alert-gate.ts fails closed). A replica that leads again within an interval of its
 * last poll starts from that poll's reading (a lease blip does not flap every held node's reason)
 * and asks at once. A gate whose connection settings change (url, interval, timeout, TLS, token
 * reference) is asked afresh; its patterns are the planner's and change nothing here.
 */
import { abortableSleep, isAborted } from '../../shared/abortable-sleep.ts';
import { toError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { AlertGateSource, AskAlertGate } from '../alerts/ask-alert-gate.ts';
import type { AlertGateReading } from '../plan/snapshot.ts';

/** A rollout's gate, keyed by the rollout (`namespace/name`). */
export interface KeyedAlertGate extends AlertGateSource {
  readonly key: string;
}

interface Poll {
  readonly settings: string;
  readonly stop: AbortController;
  reading: AlertGateReading | null;
  /** When `reading` was taken (ms since epoch). */
  readAt: number;
}

export class AlertGatePollers {
  private readonly polls = new Map<string, Poll>();
  /** The polls of the last term, stopped: a reading young enough seeds the next term's poll. */
  private readonly stopped = new Map<string, Poll>();
  private readonly ask: AskAlertGate;
  private readonly onChange: () => void;
  private readonly logger: Logger;
  private readonly now: () => number;

  constructor(deps: { readonly ask: AskAlertGate; readonly onChange: () => void; readonly logger: Logger; readonly now: () => number }) {
    this.ask = deps.ask;
    this.onChange = deps.onChange;
    this.logger = deps.logger;
    this.now = deps.now;
  }

  /** Polls exactly these gates from now on (until `term` aborts): starts new ones, restarts changed ones, stops the rest. */
  sync(gates: readonly KeyedAlertGate[], term: AbortSignal): void {
    const wanted = new Set<string>();
    for (const source of gates) {
      wanted.add(source.key);
      const settings = settingsOf(source);
      const running = this.polls.get(source.key);
      if (running?.settings === settings) continue;
      running?.stop.abort();
      const earlier = this.stopped.get(source.key);
      const fresh = earlier?.settings === settings && this.now() - earlier.readAt < source.gate.intervalSeconds * 1000;
      const poll: Poll = { settings, stop: new AbortController(), reading: fresh ? earlier.reading : null, readAt: fresh ? earlier.readAt : 0 };
      this.polls.set(source.key, poll);
      void this.run(source, poll, AbortSignal.any([term, poll.stop.signal]));
    }
    for (const [key, poll] of this.polls) {
      if (wanted.has(key)) continue;
      poll.stop.abort();
      this.polls.delete(key);
    }
  }

  /** The rollout's last reading; null before the first answer (or without a gate). */
  reading(key: string): AlertGateReading | null {
    return this.polls.get(key)?.reading ?? null;
  }

  /** Stops every poll (the end of a term); their readings are no longer given, and seed the next term's polls only while younger than an interval. */
  clear(): void {
    this.stopped.clear();
    for (const [key, poll] of this.polls) {
      poll.stop.abort();
      this.stopped.set(key, poll);
    }
    this.polls.clear();
  }

  private async run(source: KeyedAlertGate, poll: Poll, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let reading: AlertGateReading;
      try {
        reading = await this.ask(source, signal);
      } catch (error) {
        // The adapter never rejects; a bug in it must still hold starts, not stop the polls.
        reading = { kind: 'unanswered', problem: toError(error).message };
      }
      if (isAborted(signal)) return;
      const changed = poll.reading === null || resultOf(poll.reading) !== resultOf(reading);
      poll.reading = reading;
      poll.readAt = this.now();
      if (changed) {
        if (reading.kind === 'unanswered') this.logger.warn({ rollout: source.key, url: source.gate.url, problem: reading.problem }, 'alert gate: Prometheus cannot be asked; new starts held');
        else this.logger.info({ rollout: source.key, url: source.gate.url, firing: namesOf(reading) }, 'alert gate: firing alerts changed');
        this.onChange();
      }
      await abortableSleep(source.gate.intervalSeconds * 1000, signal);
    }
  }
}

/** What the gate's result depends on: the firing alerts' names, or the problem. */
function resultOf(reading: AlertGateReading): string {
  return reading.kind === 'unanswered' ? `unanswered:${reading.problem}` : `answered:${namesOf(reading).join('\n')}`;
}

function namesOf(reading: Extract<AlertGateReading, { kind: 'answered' }>): string[] {
  return [...new Set(reading.firing.map((a) => a.name))].sort();
}

function settingsOf({ namespace, gate }: AlertGateSource): string {
  const { url, intervalSeconds, timeoutSeconds, ca, insecureSkipVerify, bearerToken } = gate;
  return JSON.stringify({ namespace, url, intervalSeconds, timeoutSeconds, ca, insecureSkipVerify, bearerToken });
}
