/**
 * One prompt turn: folds the agent's `session/update`s (applied in arrival order by the
 * session's pump) into streamed run events and the final output, and settles exactly once —
 * on the agent's stop reason, a local cancel, or a failure of the agent or its connection.
 */
import type * as acp from '@agentclientprotocol/sdk';
import { DEFAULT_MAX_OUTPUT_BYTES, TRUNCATION_MARKER, boundDiagnostic, capBlocks, capText, truncationNote, type ContentBlock, type RunEvent, type SubagentResult, type SubagentStopReason } from '../../../protocol/index.js';
import { mapStopReason } from './stop-reason.js';
import type { StructuredOutput } from './structured-output.js';

export interface TurnOptions {
  readonly emit: (event: RunEvent) => void;
  readonly structured: StructuredOutput | undefined;
  /** Runs once when the turn is cancelled locally: tell the agent (`session/cancel`). */
  readonly onCancel: () => void;
  /**
   * The run's output cap (the service's, service/output-budget.ts): text kept per message beyond
   * it is dropped, and the turn's output is cut to it here, where the text is (see `resolveWith`).
   */
  readonly maxOutputBytes?: number;
}

/**
 * One assistant message, as far as ACP lets us tell messages apart. Its text is kept as the
 * chunks the agent sent, joined once when the turn settles: a string grown chunk by chunk is
 * flattened (copied) by the first read of it, and cut (copied again) to the cap after that.
 */
interface Message {
  messageId: string | undefined;
  parts: string[];
  bytes: number;
  /** Nothing but whitespace so far. */
  blank: boolean;
}

const NOT_BLANK = /\S/;

export class Turn {
  readonly result: Promise<SubagentResult>;
  private settle!: (result: SubagentResult) => void;
  private outcome: SubagentStopReason | undefined;
  private readonly cancelled = new AbortController();
  private messages: Message[] = [];
  /** A tool call happened since the last chunk: the next chunk starts a new message. */
  private boundary = true;
  private readonly toolNames = new Map<string, string>();
  /** What the policy or the workspace refused the agent during this turn, for the diagnostic. */
  private readonly denials: string[] = [];

  constructor(private readonly options: TurnOptions) {
    this.result = new Promise((resolve) => {
      this.settle = resolve;
    });
  }

  get settled(): boolean {
    return this.outcome !== undefined;
  }

  get stopReason(): SubagentStopReason | undefined {
    return this.outcome;
  }

  /** Aborted by a local cancel, so outstanding permission prompts can answer `cancelled`. */
  get cancelSignal(): AbortSignal {
    return this.cancelled.signal;
  }

  /** The agent was refused something; a result that hid it would look like success. */
  noteDenial(what: string): void {
    if (!this.settled) this.denials.push(what);
  }

  applyUpdate(update: acp.SessionUpdate): void {
    if (this.settled) return;
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        if (update.content.type === 'text') {
          this.appendText(update.content.text, update.messageId ?? undefined);
          this.options.emit({ kind: 'text-delta', text: update.content.text });
        }
        return;
      case 'agent_thought_chunk':
        if (update.content.type === 'text') this.options.emit({ kind: 'reasoning-delta', text: update.content.text });
        return;
      case 'tool_call': {
        this.boundary = true;
        const name = update.name ?? update.title;
        this.toolNames.set(update.toolCallId, name);
        this.options.emit({
          kind: 'session',
          event: {
            type: 'assistant/message',
            content: [],
            toolCalls: [{ id: update.toolCallId, name, arguments: JSON.stringify(update.rawInput ?? {}) }],
          },
        });
        this.emitToolResult(update.toolCallId, update.status ?? undefined, update.content ?? undefined);
        return;
      }
      case 'tool_call_update':
        this.boundary = true;
        this.emitToolResult(update.toolCallId, update.status ?? undefined, update.content ?? undefined);
        return;
      default:
        // Plans, mode and usage updates carry nothing the seam's result or events represent.
        return;
    }
  }

  /** The agent answered `session/prompt`. */
  finish(stopReason: string): void {
    if (this.settled) return;
    const reason = mapStopReason(stopReason);
    const text = this.finalText(true);
    if (reason === 'error') {
      this.resolveWith({ output: blocks(text), stopReason: 'error', diagnostic: boundDiagnostic(`agent ended the turn with unknown stop reason ${JSON.stringify(stopReason)}`) });
      return;
    }
    if (reason === 'completed' && this.options.structured) {
      // Checked on the text as kept (up to one chunk past the cap), not on its cut.
      const checked = this.options.structured.check(this.cutOutput ? this.finalText() : text);
      this.resolveWith(
        checked.ok
          ? { output: blocks(text), structured: checked.value, stopReason: 'completed' }
          : { output: blocks(text), stopReason: 'error', diagnostic: checked.diagnostic },
      );
      return;
    }
    this.resolveWith({ output: blocks(text), stopReason: reason });
  }

  /** The agent or its connection failed; whatever text arrived is kept as partial output. */
  fail(diagnostic: string): void {
    if (this.settled) return;
    this.resolveWith({ output: blocks(this.finalText(true)), stopReason: 'error', diagnostic: boundDiagnostic(diagnostic) });
  }

  /** Settle `aborted` now; the agent's own answer to the cancel is not awaited. */
  cancel(): void {
    if (this.settled) return;
    this.resolveWith({ output: blocks(this.finalText(true)), stopReason: 'aborted' });
    this.cancelled.abort();
    this.options.onCancel();
  }

  /**
   * The last non-empty assistant message of this turn; `capped`: already cut to the output cap
   * as capText cuts it (marker included), built in one piece when its text is one-byte (the
   * usual answer), so the result is the answer's only copy and the service's cut finds nothing
   * to do.
   */
  finalText(capped = false): string {
    const cap = this.options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const message = this.messages[i];
      if (!message || message.blank) continue;
      if (!capped) return message.parts.join('');
      this.cutOutput = message.bytes > cap;
      return cutToCap(message, cap);
    }
    return '';
  }

  /** The output finalText(true) made was cut to the cap (capped() names the cut). */
  private cutOutput = false;

  private resolveWith(result: SubagentResult): void {
    this.outcome = result.stopReason;
    // The result holds the output now; the messages would keep a second copy of a cut answer's
    // text for as long as the run is kept.
    this.messages = [];
    this.settle(this.withDenials(this.capped(result)));
  }

  /**
   * The output cut to the cap, the cut named first in the diagnostic (as the service names it).
   * Cut here, the provider's result is the only copy of the answer: a cut made by the service
   * from the provider's text would be a second one, kept beside it for as long as the run is.
   */
  private capped(result: SubagentResult): SubagentResult {
    const cap = this.options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const output = capBlocks(result.output, cap);
    if (!output.truncated && !this.cutOutput) return result;
    const notes = [truncationNote('output', cap), result.diagnostic].filter((note) => note !== undefined && note !== '');
    return { ...result, output: output.blocks, diagnostic: boundDiagnostic(notes.join('; ')) };
  }

  /** Adds the list of refusals to the diagnostic, after whatever the diagnostic already says. */
  private withDenials(result: SubagentResult): SubagentResult {
    if (this.denials.length === 0) return result;
    const n = this.denials.length;
    const list = `the agent was refused ${n} request${n === 1 ? '' : 's'}: ${this.denials.join('; ')}`;
    return { ...result, diagnostic: boundDiagnostic(result.diagnostic === undefined ? list : `${result.diagnostic}; ${list}`) };
  }

  private appendText(text: string, messageId: string | undefined): void {
    const last = this.messages.at(-1);
    const sameMessage =
      last !== undefined && !this.boundary && (messageId === undefined || last.messageId === undefined || messageId === last.messageId);
    const bytes = Buffer.byteLength(text, 'utf8');
    if (sameMessage) {
      // One byte over the cap is enough for the service to see the cut and name it.
      if (last.bytes <= (this.options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES)) {
        last.parts.push(text);
        last.bytes += bytes;
        if (last.blank) last.blank = !NOT_BLANK.test(text);
      }
      last.messageId ??= messageId;
    } else {
      // Only the last non-empty message can become the output: drop the older ones.
      let keep = this.messages.length - 1;
      while (keep > 0 && this.messages[keep]?.blank === true) keep--;
      if (keep > 0) this.messages.splice(0, keep);
      this.messages.push({ messageId, parts: [text], bytes, blank: !NOT_BLANK.test(text) });
    }
    this.boundary = false;
  }

  private emitToolResult(id: string, status: acp.ToolCallStatus | undefined, content: acp.ToolCallContent[] | undefined): void {
    if (status !== 'completed' && status !== 'failed') return;
    this.options.emit({
      kind: 'session',
      event: {
        type: 'tool/result',
        callId: id,
        name: this.toolNames.get(id) ?? id,
        content: (content ?? []).flatMap(describeToolContent),
        isError: status === 'failed',
      },
    });
  }
}

/**
 * `message`'s text cut to `cap` bytes, as capText(text, cap) cuts it: joined once with the marker
 * when the kept prefix is one-byte text (then its UTF-16 units are its bytes); otherwise joined,
 * then cut by capText.
 */
function cutToCap(message: Message, cap: number): string {
  if (message.bytes <= cap) return message.parts.join('');
  const room = Math.max(0, cap - Buffer.byteLength(TRUNCATION_MARKER, 'utf8'));
  const kept: string[] = [];
  let units = 0;
  for (const part of message.parts) {
    if (units >= room) break;
    const piece = units + part.length <= room ? part : part.slice(0, room - units);
    if (Buffer.byteLength(piece, 'utf8') !== piece.length) return capText(message.parts.join(''), cap).text;
    kept.push(piece);
    units += piece.length;
  }
  kept.push(TRUNCATION_MARKER);
  return kept.join('');
}

function blocks(text: string): ContentBlock[] {
  return text === '' ? [] : [{ type: 'text', text }];
}

function describeToolContent(item: acp.ToolCallContent): ContentBlock[] {
  switch (item.type) {
    case 'content':
      return item.content.type === 'text' ? [{ type: 'text', text: item.content.text }] : [];
    case 'diff':
      return [{ type: 'text', text: `[diff] ${item.path}` }];
    case 'terminal':
      return [{ type: 'text', text: `[terminal] ${item.terminalId}` }];
    default:
      return [];
  }
}
