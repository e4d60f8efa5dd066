/**
 * One connection's run events gathered into `run/events` notifications (protocol 1.3): what its
 * runs emit in one event-loop turn leaves as one message instead of one `run/event` each, so the
 * client reads, queues, dispatches and checks one message where it did dozens.
 *
 * Order: a batch is one place in the connection's message sequence, and it is written
 *  - before any other message of the connection (a reply, a lifecycle notification, a daemon →
 *    client request, a farewell): the connection's writer calls `flush` first. So an end never
 *    overtakes its run's last events, and nothing written after an event overtakes it;
 *  - at the end of the event-loop turn in which its first event came (`setImmediate`);
 *  - once it holds `maxEvents` events or `maxChars` characters of JSON: a turn that emits a
 *    great deal makes several bounded frames, not one giant one. An event bigger than the bound
 *    goes alone.
 * Inside a batch events keep their order across runs: consecutive events of one run share a
 * stretch (`{runId, events}`), and a run that interleaves with another starts a new stretch.
 *
 * The JSON is built as events come, so the bound is measured on what is sent and nothing is
 * serialised twice: a session event's JSON is the one its session log made (session-event-json.ts).
 * Except for a client that is not reading (its writer is backed up): a batch begun then holds its
 * events, measured in bytes without their JSON (protocol/json-bytes.ts), and its JSON is built
 * when the client reads. Streamed text is the run's own chunks, kept by the run anyway while it
 * goes on; its JSON would be another copy, waiting for as long as the client does not read.
 */
import { frameOfJson, jsonBytes, RunEventsNotification, type DeferredFrame, type RunEvent } from '../../protocol/index.js';
import { sessionEventJson } from '../store/session-event-json.js';

export interface BatchBounds {
  /** Events in one notification (the schema allows far more: MAX_BATCHED_EVENTS). */
  readonly maxEvents: number;
  /** Characters of JSON in one notification's body. */
  readonly maxChars: number;
}

export const DEFAULT_BATCH_BOUNDS: BatchBounds = { maxEvents: 1024, maxChars: 256 * 1024 };

const HEAD = `{"jsonrpc":"2.0","method":${JSON.stringify(RunEventsNotification.method)},"params":{"runs":[`;
/** Closes the last stretch's events and object, `runs`, `params` and the message. */
const TAIL = ']}]}}';

/** Where a batch goes: as JSON, or deferred (its size now, its JSON when the peer reads). */
export interface BatchSink {
  send(json: string, events: number): void;
  /** Whether the peer is not taking what was written: a batch begun now is deferred. */
  readonly backedUp?: () => boolean;
  sendDeferred?(frame: DeferredFrame, events: number): void;
}

export class RunEventBatch {
  private body = '';
  private count = 0;
  /** Bytes of the body so far, when this batch is deferred (its events are held, not their JSON). */
  private bytes = 0;
  private held: Array<readonly [string, RunEvent]> | undefined;
  private lastRunId: string | undefined;
  private scheduled = false;

  /**
   * `sink.send` gets a whole `run/events` message as JSON, and how many events it carries. A
   * batch begun while `sink.backedUp()` holds its events instead, measured in bytes, and goes
   * to `sink.sendDeferred`: a peer that is not reading costs the events (whose text the run
   * emitted anyway), not a serialised copy of them.
   */
  private readonly sink: BatchSink;

  constructor(
    sink: BatchSink | BatchSink['send'],
    private readonly bounds: BatchBounds = DEFAULT_BATCH_BOUNDS,
  ) {
    this.sink = typeof sink === 'function' ? { send: sink } : sink;
  }

  /** Events waiting for the next flush. */
  get size(): number {
    return this.count;
  }

  add(runId: string, event: RunEvent): void {
    if (this.count === 0 && this.sink.sendDeferred && this.sink.backedUp?.() === true) this.held = [];
    const sameRun = runId === this.lastRunId;
    let size: number;
    let piece = '';
    if (this.held) {
      size = pieceBytes(runId, event, sameRun, this.count === 0);
      if (this.count > 0 && this.bytes + size > this.bounds.maxChars) return this.again(runId, event);
      this.held.push([runId, event]);
      this.bytes += size;
      size = this.bytes;
    } else {
      piece = pieceOf(runId, runEventJson(event), sameRun, this.count === 0);
      if (this.count > 0 && this.body.length + piece.length > this.bounds.maxChars) return this.again(runId, event);
      this.body += piece;
      size = this.body.length;
    }
    this.lastRunId = runId;
    this.count += 1;
    if (this.count >= this.bounds.maxEvents || size >= this.bounds.maxChars) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    }
  }

  /** Past the bound: what is waiting goes, and `event` begins the next batch. */
  private again(runId: string, event: RunEvent): void {
    this.flush();
    this.add(runId, event);
  }

  /** Sends what is waiting, if anything. Emptied before sending, so a send that writes again finds nothing. */
  flush(): void {
    if (this.count === 0) return;
    const events = this.count;
    const held = this.held;
    const json = held ? '' : `${HEAD}${this.body}${TAIL}`;
    const bytes = HEAD.length + this.bytes + TAIL.length;
    this.body = '';
    this.bytes = 0;
    this.held = undefined;
    this.count = 0;
    this.lastRunId = undefined;
    if (held && this.sink.sendDeferred) {
      this.sink.sendDeferred({ bytes: `Content-Length: ${bytes}\r\n\r\n`.length + bytes, build: () => frameOfJson(batchJson(held)).text }, events);
    } else this.sink.send(json, events);
  }
}

/** One event's place in the body: after its run's last event, or opening a new stretch. */
function pieceOf(runId: string, json: string, sameRun: boolean, first: boolean): string {
  return sameRun ? `,${json}` : `${first ? '' : ']},'}{"runId":${JSON.stringify(runId)},"events":[${json}`;
}

/** The UTF-8 bytes `pieceOf` would make for `event`, without its JSON (json-bytes.ts). */
function pieceBytes(runId: string, event: RunEvent, sameRun: boolean, first: boolean): number {
  const json = event.kind === 'session' ? SESSION_WRAP + Buffer.byteLength(sessionEventJson(event.event), 'utf8') : jsonBytes(event);
  return sameRun ? 1 + json : (first ? 0 : 3) + STRETCH_WRAP + jsonBytes(runId) + json;
}

const SESSION_WRAP = '{"kind":"session","event":}'.length;
const STRETCH_WRAP = '{"runId":,"events":['.length;

/** A held batch's whole message, as `add` would have built it. */
function batchJson(held: ReadonlyArray<readonly [string, RunEvent]>): string {
  const parts = [HEAD];
  let last: string | undefined;
  for (const [runId, event] of held) {
    parts.push(pieceOf(runId, runEventJson(event), runId === last, last === undefined));
    last = runId;
  }
  parts.push(TAIL);
  return parts.join('');
}

/** `JSON.stringify(event)`, a session event's part taken from its session log's serialisation. */
function runEventJson(event: RunEvent): string {
  return event.kind === 'session' ? `{"kind":"session","event":${sessionEventJson(event.event)}}` : JSON.stringify(event);
}
