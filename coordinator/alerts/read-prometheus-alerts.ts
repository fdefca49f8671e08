/**
 * One poll of Prometheus's alerts API (`GET <url>/api/v1/alerts`) for the alert gate, with
 * undici: its own connection (the CA and certificate check of the gate), one deadline for the
 * whole request and body, and an answer read only as far as MAX_ANSWER_BYTES.
 *
 * Never rejects: whatever goes wrong is the reading's problem, a short text that holds starts
 * (the gate fails closed). No text it returns or logs holds the bearer token: it goes only into
 * the Authorization header, and is cut out of any text that might echo it.
 */
import { Agent, request } from 'undici';
import { z } from 'zod';
import type { AlertGateReading, FiringAlert } from '../plan/snapshot.ts';

export interface PrometheusConnection {
  /** Prometheus's base URL, without a trailing slash. */
  readonly url: string;
  /** Sent as `Authorization: Bearer <token>`; null: no header. */
  readonly token: string | null;
  /** PEM CA bundle for an https URL; null: the platform's CAs. */
  readonly ca: string | null;
  readonly insecureSkipVerify: boolean;
  readonly timeoutMs: number;
}

/** An answer larger than this is not read (Prometheus's answer for thousands of alerts is a few MiB). */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** How much of an error answer's body goes into the problem text. */
const BODY_SHOWN = 200;

const alertsAnswer = z.object({
  status: z.literal('success'),
  data: z.object({
    alerts: z.array(z.object({ labels: z.record(z.string(), z.string()), state: z.string() })),
  }),
});

export async function readPrometheusAlerts(connection: PrometheusConnection, signal: AbortSignal): Promise<AlertGateReading> {
  const deadline = AbortSignal.timeout(connection.timeoutMs);
  const agent = new Agent({
    connect: { timeout: connection.timeoutMs, rejectUnauthorized: !connection.insecureSkipVerify, ...(connection.ca === null ? {} : { ca: connection.ca }) },
  });
  const problem = (text: string): AlertGateReading => ({ kind: 'unanswered', problem: withoutToken(text, connection.token) });
  try {
    const response = await request(`${connection.url}/api/v1/alerts`, {
      dispatcher: agent,
      method: 'GET',
      headers: { accept: 'application/json', ...(connection.token === null ? {} : { authorization: `Bearer ${connection.token}` }) },
      headersTimeout: connection.timeoutMs,
      bodyTimeout: connection.timeoutMs,
      signal: AbortSignal.any([signal, deadline]),
    });
    const body = await readCapped(response.body);
    if (body === null) return problem(`answer larger than ${MAX_ANSWER_BYTES} bytes`);
    if (response.statusCode !== 200) return problem(`HTTP ${response.statusCode}: ${oneLine(body).slice(0, BODY_SHOWN)}`);
    return parseAlertsAnswer(body) ?? problem(`answered something that is not Prometheus's alerts API: ${oneLine(body).slice(0, BODY_SHOWN)}`);
  } catch (error) {
    if (deadline.aborted && !signal.aborted) return problem(`no answer within ${connection.timeoutMs / 1000}s`);
    return problem(describeFailure(error));
  } finally {
    await agent.destroy();
  }
}

/** The firing alerts of an alerts API answer; null when the text is not one. */
export function parseAlertsAnswer(text: string): AlertGateReading | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = alertsAnswer.safeParse(json);
  if (!parsed.success) return null;
  const firing: FiringAlert[] = parsed.data.data.alerts
    .filter((a) => a.state === 'firing')
    .map((a) => ({ name: a.labels.alertname ?? '', labels: a.labels }));
  return { kind: 'answered', firing };
}

/** The body as text, or null when it is larger than MAX_ANSWER_BYTES (then it is not read on). */
async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_ANSWER_BYTES) {
      body.destroy();
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** undici's errors name the cause (`connect ECONNREFUSED 127.0.0.1:9090`, a certificate problem) in `cause` or `code`. */
function describeFailure(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause : null;
  const code = (cause as { code?: unknown } | null)?.code ?? (error as { code?: unknown }).code;
  const text = cause !== null && cause.message !== '' ? cause.message : error.message;
  return typeof code === 'string' && !text.includes(code) ? `${code}: ${text}` : text;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function withoutToken(text: string, token: string | null): string {
  return token === null || token === '' ? text : text.split(token).join('<token>');
}
