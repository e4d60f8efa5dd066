/**
 * One `JSON.stringify` per stored session event. The session log serialises each event it
 * appends for its file; the run's stream budget measures that same JSON and the connection's
 * `run/events` batch sends it, so an event streamed with the session log on is serialised once,
 * not three times.
 *
 * Rules:
 * - The JSON is of the event as stored (stamped), taken when it was appended: the line in the
 *   file and the event on the wire are the same text. Stored events are not changed afterwards
 *   (SessionLog.events is read-only to its callers).
 * - An event no log serialised (a seed, a restored log's events, a test's literal) is serialised
 *   here on first use, and that JSON is kept too.
 * - Kept in a WeakMap on the event object: nothing is added to the event, and the JSON goes with it.
 */
import type { SessionEvent } from '../../protocol/index.js';

const jsonOf = new WeakMap<SessionEvent, string>();

/** Records `json` as `event`'s serialisation (the session log, which has just made it). */
export function rememberSessionEventJson(event: SessionEvent, json: string): void {
  jsonOf.set(event, json);
}

/** `JSON.stringify(event)`, made at most once per event object. */
export function sessionEventJson(event: SessionEvent): string {
  let json = jsonOf.get(event);
  if (json === undefined) {
    json = JSON.stringify(event);
    jsonOf.set(event, json);
  }
  return json;
}
