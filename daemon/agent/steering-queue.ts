/**
 * Messages sent to a running child, waiting for the next step boundary. The queue is open only
 * while a turn runs; a message sent when no turn will read it is refused (RUN_STATE) rather than
 * accepted and lost.
 */
import { SubagentError, type ContentBlock } from '../../protocol/index.js';

export class SteeringQueue {
  private queued: ContentBlock[][] = [];
  private accepting = false;

  get size(): number {
    return this.queued.length;
  }

  open(): void {
    this.accepting = true;
  }

  /** Stops accepting and hands back what was still queued. */
  close(): ContentBlock[][] {
    this.accepting = false;
    return this.drain();
  }

  push(content: ContentBlock[]): void {
    if (!this.accepting) throw new SubagentError('RUN_STATE', 'the child is not running a turn; steering needs a running child');
    this.queued.push(structuredClone(content));
  }

  drain(): ContentBlock[][] {
    const out = this.queued;
    this.queued = [];
    return out;
  }
}
