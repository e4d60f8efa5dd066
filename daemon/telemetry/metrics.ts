/**
 * The daemon's Prometheus metrics (docs/observability.md lists each): a RunObserver that counts
 * runs, their waits and tokens, plus gauges read at scrape time (runs in flight, queue depth,
 * connections) and prom-client's process metrics (RSS, event-loop delay).
 *
 * Rules:
 * - No label ever holds prompt text, a path or a secret. Labels are the provider's name, a known
 *   stop reason (others read `other`), the client's name without its version, and a model
 *   endpoint's origin (scheme, host, port: no path, no credentials).
 * - Label values a client or server chooses are bounded: past MAX_LABEL_VALUES distinct values a
 *   label reads `other`, so no client can grow the daemon's memory through its name.
 *
 * prom-client is loaded only when metrics are on (cli/daemon-command.ts imports this module then).
 */
import client from 'prom-client';
import { KNOWN_STOP_REASONS, type EndParams } from '../../protocol/index.js';
import type { ObservedStart, RunObserver } from '../service/run-observer.js';
import type { ModelRequestSink } from './model-requests.js';

/** Distinct values one chosen-by-others label may take before it reads `other`. */
export const MAX_LABEL_VALUES = 64;

export interface PoolGauges {
  /** Runs working now, and starts waiting for a slot. */
  readonly admission: () => { readonly running: number; readonly queued: number };
  readonly connections: () => number;
}

export class DaemonMetrics implements RunObserver, ModelRequestSink {
  readonly registry = new client.Registry();
  private readonly runsStarted: client.Counter<'provider'>;
  private readonly runsEnded: client.Counter<'provider' | 'stop_reason'>;
  private readonly admissionWait: client.Histogram<'provider'>;
  private readonly startToReady: client.Histogram<'provider'>;
  private readonly tokens: client.Counter<'provider' | 'client' | 'direction'>;
  private readonly modelRequests: client.Counter<'endpoint' | 'status'>;
  private readonly rateLimited: client.Counter<'endpoint'>;
  /** What a start said of itself, until its run ends. */
  private readonly runs = new Map<string, { provider: string; client: string; startedAt: number }>();
  private readonly clients = new BoundedLabel();
  private readonly endpoints = new BoundedLabel();

  constructor(gauges: PoolGauges) {
    const registers = [this.registry];
    client.collectDefaultMetrics({ register: this.registry, prefix: 'subagentd_' });
    this.runsStarted = new client.Counter({ name: 'subagentd_runs_started_total', help: 'Runs published (ready), by provider.', labelNames: ['provider'], registers });
    this.runsEnded = new client.Counter({
      name: 'subagentd_runs_ended_total',
      help: 'Runs that ended, by provider and stop reason.',
      labelNames: ['provider', 'stop_reason'],
      registers,
    });
    new client.Gauge({
      name: 'subagentd_runs_in_flight',
      help: 'Runs holding a slot now.',
      registers,
      collect() {
        this.set(gauges.admission().running);
      },
    });
    new client.Gauge({
      name: 'subagentd_queue_depth',
      help: 'Starts waiting for a slot now.',
      registers,
      collect() {
        this.set(gauges.admission().queued);
      },
    });
    new client.Gauge({
      name: 'subagentd_connections',
      help: 'Client connections open now.',
      registers,
      collect() {
        this.set(gauges.connections());
      },
    });
    const seconds = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
    this.admissionWait = new client.Histogram({
      name: 'subagentd_admission_wait_seconds',
      help: 'Time a start waited for a run slot.',
      labelNames: ['provider'],
      buckets: seconds,
      registers,
    });
    this.startToReady = new client.Histogram({
      name: 'subagentd_start_ready_seconds',
      help: 'Time from a start request to its child being ready (admission wait included).',
      labelNames: ['provider'],
      buckets: seconds,
      registers,
    });
    this.tokens = new client.Counter({
      name: 'subagentd_tokens_total',
      help: 'Model tokens of ended runs, by provider, client name and direction (in = prompt, out = completion).',
      labelNames: ['provider', 'client', 'direction'],
      registers,
    });
    this.modelRequests = new client.Counter({
      name: 'subagentd_model_requests_total',
      help: 'Requests to model endpoints, by endpoint origin and HTTP status (`error` when none came).',
      labelNames: ['endpoint', 'status'],
      registers,
    });
    this.rateLimited = new client.Counter({
      name: 'subagentd_model_rate_limited_total',
      help: 'Model requests answered 429, by endpoint origin.',
      labelNames: ['endpoint'],
      registers,
    });
  }

  starting(start: ObservedStart): void {
    this.runs.set(start.runId, { provider: start.provider, client: this.clients.of(clientLabel(start.client)), startedAt: monotonicMs() });
  }

  admitted(runId: string, waitedMs: number): void {
    const run = this.runs.get(runId);
    if (run) this.admissionWait.observe({ provider: run.provider }, waitedMs / 1000);
  }

  ready(runId: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    this.runsStarted.inc({ provider: run.provider });
    this.startToReady.observe({ provider: run.provider }, (monotonicMs() - run.startedAt) / 1000);
  }

  startFailed(runId: string): void {
    this.runs.delete(runId);
  }

  /** Tokens are counted from each run's end (its summed usage): one place, whichever the provider. */
  ended(end: EndParams): void {
    const run = this.runs.get(end.runId);
    this.runs.delete(end.runId);
    const provider = run?.provider ?? end.provider;
    const reason = (KNOWN_STOP_REASONS as readonly string[]).includes(end.stopReason) ? end.stopReason : 'other';
    this.runsEnded.inc({ provider, stop_reason: reason });
    const usage = end.usage ?? end.result?.usage;
    if (usage) {
      const labels = { provider, client: run?.client ?? 'unknown' };
      this.tokens.inc({ ...labels, direction: 'in' }, usage.promptTokens);
      this.tokens.inc({ ...labels, direction: 'out' }, usage.completionTokens);
    }
  }

  modelRequest(endpoint: string, status: number | 'error'): void {
    const label = this.endpoints.of(endpoint);
    this.modelRequests.inc({ endpoint: label, status: String(status) });
    if (status === 429) this.rateLimited.inc({ endpoint: label });
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** `name@version` → `name`, bounded to label-safe characters. */
function clientLabel(name: string | undefined): string {
  if (name === undefined || name === 'unknown') return 'unknown';
  const bare = name.replace(/@[^@]*$/, '').replace(/[^A-Za-z0-9._\-/ ]/g, '_').slice(0, 64);
  return bare === '' ? 'unknown' : bare;
}

/** A label whose values others choose: the first MAX_LABEL_VALUES are kept, later ones read `other`. */
class BoundedLabel {
  private readonly seen = new Set<string>();

  of(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= MAX_LABEL_VALUES) return 'other';
    this.seen.add(value);
    return value;
  }
}

function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
