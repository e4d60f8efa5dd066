/**
 * One `JSON.stringify` per streamed session event. The session log serialises each event it
 * appends for its file; the run's stream budget measures that same JSON and the connection's
 * `run/events` batch sends it, so an event streamed with the session log on is serialised once,
 * not three times.
 *
 * Rules:
 * - The JSON is of the event as stored (stamped), taken when it was appended: the line in the
 *   file and the event on the wire are the same text. Stored events are not changed afterwards
 *   (SessionLog.events is read-only to its callers).
 * - Only the last serialisation is kept: a child emits each event right after appending it, and
 *   the budget and the batch read it in that same call. Any other event (one held until its run
 *   was answered, a seed, a test's literal) is serialised again: slower, never different.
 *   A WeakMap of every event would keep them all, and costs about as much per event as the
 *   stringify it saves.
 */
import type { SessionEvent } from '../../protocol/index.js';

let lastEvent: SessionEvent | undefined;
let lastJson = '';

/** Records `json` as `event`'s serialisation (the session log, which has just made it). */
export function rememberSessionEventJson(event: SessionEvent, json: string): void {
  lastEvent = event;
  lastJson = json;
}

/** `JSON.stringify(event)`: the one just made, when it is this event's. */
export function sessionEventJson(event: SessionEvent): string {
  if (event !== lastEvent) rememberSessionEventJson(event, JSON.stringify(event));
  return lastJson;
}
