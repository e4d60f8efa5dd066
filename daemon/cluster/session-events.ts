/**
 * A run's session, stored in JetStream so another member can bring its child back: one stream,
 * one subject per run (`<prefix>.session.<runId>`), one message per log line (the header first,
 * then each event). The executing member appends as the child works; a member taking the run
 * over reads the subject back in order and rebuilds the child's session file from it.
 *
 * Rules and failures:
 * - Each line carries a message id `<runId>:<index>`: a line published twice (a retry after a
 *   lost ack) is stored once, within the stream's duplicate window.
 * - What was not published before a member died is lost, as the unflushed tail of a local log is
 *   at a crash: the run continues from the last stored line (restore-child closes a cut turn).
 * - `readAll` stops at the count the server reported when it started; lines appended meanwhile
 *   are not waited for.
 * - Sessions are kept `maxAgeDays` (default 14, like session logs), then the server drops them.
 */
import { DeliverPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { NatsLink } from './nats-link.js';
import type { ClusterNames } from './names.js';

export class SessionEvents {
  private constructor(
    private readonly link: NatsLink,
    private readonly names: ClusterNames,
  ) {}

  static async open(link: NatsLink, names: ClusterNames, maxAgeDays = 14): Promise<SessionEvents> {
    try {
      await link.jsm.streams.info(names.sessionStream);
    } catch {
      await link.jsm.streams
        .add({
          name: names.sessionStream,
          subjects: [names.sessionSubjects],
          retention: RetentionPolicy.Limits,
          storage: StorageType.File,
          max_age: nanos(maxAgeDays * 86_400_000),
          duplicate_window: nanos(120_000),
        })
        .catch(async (error: unknown) => {
          await link.jsm.streams.info(names.sessionStream).catch(() => Promise.reject(error));
        });
    }
    return new SessionEvents(link, names);
  }

  /** Stores line `index` of a run's session (0 is the header). Resolves once the server has it. */
  async append(runId: string, index: number, line: unknown): Promise<void> {
    await this.link.js.publish(this.names.sessionSubject(runId), JSON.stringify(line), { msgID: `${runId}:${index}` });
  }

  /** Every stored line of a run's session, in order (empty when none was stored). */
  async readAll<T = unknown>(runId: string): Promise<T[]> {
    const subject = this.names.sessionSubject(runId);
    const info = await this.link.jsm.streams.info(this.names.sessionStream, { subjects_filter: subject });
    const count = info.state.subjects?.[subject] ?? 0;
    if (count === 0) return [];
    const consumer = await this.link.js.consumers.get(this.names.sessionStream, { filter_subjects: subject, deliver_policy: DeliverPolicy.All });
    const lines: T[] = [];
    try {
      while (lines.length < count) {
        const batch = await consumer.fetch({ max_messages: count - lines.length, expires: 2000 });
        let got = 0;
        for await (const msg of batch) {
          lines.push(msg.json<T>());
          got += 1;
          if (msg.info.pending === 0) break;
        }
        if (got === 0) break;
      }
    } finally {
      await consumer.delete().catch(() => undefined);
    }
    return lines;
  }
}
