/**
 * What the daemon tells this client unasked: providers added and removed, runs started and
 * ended, a run's streamed events, and the continuable children's notices. Params are validated
 * by the channel before we see them; a `subagent/end` that fails its schema still ends its run
 * (rejected, typed) rather than leaving it waiting for ever.
 *
 * Run events come one per `run/event` (daemons before 1.3) or many per `run/events` (1.3): a
 * batch is unpacked in its order, each event delivered as its own `run/event` would have been,
 * so a run's `onEvent` sees the same sequence either way. A batch that fails its schema is
 * checked event by event, and only the events that fail are dropped, as lone ones would be.
 */
import {
  ChildReportNotification,
  ChildSettledNotification,
  EndNotification,
  ProviderAddedNotification,
  ProviderRemovedNotification,
  RunEventNotification,
  RunEventsNotification,
  StartNotification,
  StartProgressNotification,
  type ProgressToken,
  type RunEvent,
  type ValidationFailure,
} from '../protocol/index.js';
import type { EventHub } from './event-hub.js';
import type { LocalProviders } from './local-providers.js';
import type { ProviderDirectory } from './provider-directory.js';
import type { RemoteChildren } from './remote-children.js';
import type { RpcChannel } from './rpc-channel.js';
import type { RunRecord } from './run-record.js';
import type { RunTable } from './run-table.js';
import type { ClientLogger, ClientStartRequest } from './types.js';
import { invalidFromDaemon } from './wire-errors.js';

export interface NotificationTargets {
  readonly events: EventHub;
  readonly directory: ProviderDirectory;
  readonly local: LocalProviders;
  readonly runs: RunTable;
  readonly logger: ClientLogger;
  /** The service's continuable children, when the daemon offers them. */
  children(): RemoteChildren | undefined;
  /** The `onStartProgress` of the unanswered start that sent `token`, if any. */
  startProgress(token: ProgressToken): ClientStartRequest['onStartProgress'];
}

export function serveDaemonNotifications(channel: RpcChannel, targets: NotificationTargets): void {
  const { events, directory, local, runs, logger } = targets;
  channel.onNotification(ProviderAddedNotification, ({ provider }) => {
    if (local.get(provider.name)) logger.warn?.(`the daemon added provider '${provider.name}', which a local provider of that name shadows`);
    directory.added(provider);
  });
  channel.onNotification(ProviderRemovedNotification, ({ name }) => directory.removed(name));
  channel.onNotification(StartNotification, (params) => events.emit('subagent/start', params));
  channel.onNotification(StartProgressNotification, ({ token, value }) => targets.startProgress(token)?.(value));
  channel.onNotification(
    EndNotification,
    (params) => {
      const { result, error: _error, ...rest } = params;
      // From 1.4 the daemon sends the output once, in `result`: the seam's end event still carries it.
      const output = rest.lastAssistantMessage ?? (result && result.output.length > 0 ? result.output : undefined);
      const event = output === undefined ? rest : { ...rest, lastAssistantMessage: output };
      whenKnown(runs, params.runId, (record) => record.ended(params));
      events.emit('subagent/end', event);
    },
    (params, failure) => invalidEnd(targets, params, failure),
  );
  channel.onNotification(RunEventNotification, (params) => deliver(runs, params.runId, [params.event]));
  channel.onNotification(
    RunEventsNotification,
    (params) => {
      for (const stretch of params.runs) deliver(runs, stretch.runId, stretch.events);
    },
    (params) => salvageEvents(targets, params),
  );
  channel.onNotification(ChildSettledNotification, (notice) => targets.children()?.deliver(notice));
  channel.onNotification(ChildReportNotification, (report) => targets.children()?.deliverReport(report));
}

/**
 * A run's end that fails the inbound schema (an answer over the client's text cap, say) still
 * ends the run: its result rejects with the reason, typed, rather than waiting for ever.
 */
function invalidEnd(targets: NotificationTargets, params: unknown, failure: ValidationFailure): void {
  const fields = (typeof params === 'object' && params !== null ? params : {}) as Record<string, unknown>;
  const { runId, provider, id } = fields;
  if (typeof runId !== 'string') return;
  const error = invalidFromDaemon(`subagent/end for run ${runId}`, failure);
  whenKnown(targets.runs, runId, (record) => record.fail(error));
  if (typeof provider === 'string' && typeof id === 'string') {
    targets.events.emit('subagent/end', { runId, provider, id, local: fields['local'] === true, stopReason: 'error' });
  }
}

function deliver(runs: RunTable, runId: string, events: readonly RunEvent[]): void {
  whenKnown(runs, runId, (record) => {
    for (const event of events) record.deliver(event);
  });
}

/** A batch that failed its schema: each event is checked as a lone `run/event`; the valid ones are delivered, in order. */
function salvageEvents(targets: NotificationTargets, params: unknown): void {
  const stretches = (params as { runs?: unknown } | null)?.runs;
  if (!Array.isArray(stretches)) return;
  for (const stretch of stretches) {
    const { runId, events } = (stretch ?? {}) as { runId?: unknown; events?: unknown };
    if (!Array.isArray(events)) continue;
    for (const event of events) {
      const lone = RunEventNotification.readParams({ runId, event });
      if (lone.ok) deliver(targets.runs, lone.value.runId, [lone.value.event]);
      else targets.logger.error(`dropped an invalid event of a run/events notification: ${lone.failure.message}`);
    }
  }
}

/** Apply to a run's record now, or once its start answer is in; unknown runs are ignored. */
function whenKnown(runs: RunTable, runId: string, apply: (record: RunRecord) => void): void {
  const found = runs.lookup(runId);
  if (found instanceof Promise) void found.then((record) => record && apply(record));
  else if (found) apply(found);
}
