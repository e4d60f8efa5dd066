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
 */
import { RunEventsNotification, type RunEvent } from '../../protocol/index.js';
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

export class RunEventBatch {
  private body = '';
  private count = 0;
  private lastRunId: string | undefined;
  private scheduled = false;

  /** `send` gets a whole `run/events` message as JSON, and how many events it carries. */
  constructor(
    private readonly send: (json: string, events: number) => void,
    private readonly bounds: BatchBounds = DEFAULT_BATCH_BOUNDS,
  ) {}

  /** Events waiting for the next flush. */
  get size(): number {
    return this.count;
  }

  add(runId: string, event: RunEvent): void {
    const json = runEventJson(event);
    const sameRun = runId === this.lastRunId;
    const piece = sameRun ? `,${json}` : `${this.count === 0 ? '' : ']},'}{"runId":${JSON.stringify(runId)},"events":[${json}`;
    if (this.count > 0 && this.body.length + piece.length > this.bounds.maxChars) {
      this.flush();
      this.add(runId, event);
      return;
    }
    this.body += piece;
    this.lastRunId = runId;
    this.count += 1;
    if (this.count >= this.bounds.maxEvents || this.body.length >= this.bounds.maxChars) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    }
  }

  /** Sends what is waiting, if anything. Emptied before `send`, so a send that writes again finds nothing. */
  flush(): void {
    if (this.count === 0) return;
    const json = `${HEAD}${this.body}${TAIL}`;
    const events = this.count;
    this.body = '';
    this.count = 0;
    this.lastRunId = undefined;
    this.send(json, events);
  }
}

/** `JSON.stringify(event)`, a session event's part taken from its session log's serialisation. */
function runEventJson(event: RunEvent): string {
  return event.kind === 'session' ? `{"kind":"session","event":${sessionEventJson(event.event)}}` : JSON.stringify(event);
}
