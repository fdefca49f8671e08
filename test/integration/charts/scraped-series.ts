import { Gauge } from 'prom-client';
import type { CoordinatorMetrics } from '../../../coordinator/metrics/coordinator-metrics.ts';

/** What happens to the replicas (by instance name) at the start of a stretch. */
export type Act = (replicas: Readonly<Record<string, CoordinatorMetrics>>) => void;

/** One stretch of a scenario: `act` at its start, then `minutes` scrapes a minute apart. */
export interface Stretch {
  readonly minutes: number;
  readonly act?: Act;
}

/** A promtool `input_series` entry. */
export interface InputSeries {
  readonly series: string;
  readonly values: string;
}

/**
 * What Prometheus would have stored from scraping the coordinators' real registries
 * (coordinator/metrics/coordinator-metrics.ts) once a minute, as promtool `input_series`: every
 * gauge named driver_rollout_*, with the scrape's `instance` and `job` labels added (the
 * ServiceMonitor's honorLabels keeps the gauges' own `namespace`). A series a replica stops
 * exporting gets a staleness marker, as Prometheus writes one; `_` before a series exists.
 */
export async function scrapedSeries(replicas: Readonly<Record<string, CoordinatorMetrics>>, stretches: readonly Stretch[]): Promise<InputSeries[]> {
  const values = new Map<string, (string | undefined)[]>();
  let scrape = 0;
  for (const stretch of stretches) {
    stretch.act?.(replicas);
    for (let minute = 0; minute < stretch.minutes; minute++, scrape++) {
      for (const [instance, metrics] of Object.entries(replicas)) {
        for (const [key, value] of await scrapeGauges(metrics, instance)) {
          const row = values.get(key) ?? [];
          row[scrape] = value;
          values.set(key, row);
        }
      }
    }
  }
  return [...values].map(([series, row]) => ({ series, values: promtoolValues(row, scrape) }));
}

/** The replica's driver_rollout_* gauges as `name{labels}` and value, labelled as a scrape of `instance`. */
async function scrapeGauges(metrics: CoordinatorMetrics, instance: string): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for (const metric of metrics.registry.getMetricsAsArray()) {
    if (!(metric instanceof Gauge)) continue;
    const { name, values } = await metric.get();
    if (!name.startsWith('driver_rollout_')) continue;
    for (const sample of values) out.push([selector(name, { ...sample.labels, instance, job: 'driver-rollout-coordinator' }), String(sample.value)]);
  }
  return out;
}

function selector(name: string, labels: Readonly<Record<string, string | number | undefined>>): string {
  const pairs = Object.entries(labels).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${JSON.stringify(String(v))}`);
  return `${name}{${pairs.join(',')}}`;
}

/** One value per scrape: `_` where none was scraped yet or any more, `stale` at the first scrape that missed a series it had. */
function promtoolValues(row: readonly (string | undefined)[], scrapes: number): string {
  const out: string[] = [];
  for (let i = 0; i < scrapes; i++) {
    const v = row[i];
    out.push(v ?? (i > 0 && row[i - 1] !== undefined ? 'stale' : '_'));
  }
  return out.join(' ');
}
