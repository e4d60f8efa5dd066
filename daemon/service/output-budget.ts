/**
 * The daemon's byte bounds on what one run sends and returns (protocol/output-cap.ts holds the
 * numbers and the marker). A run's event stream may carry `cap` bytes; the event that would cross
 * it is replaced by one marker delta, and everything after is dropped. A run's output is cut to
 * `cap` bytes when it settles (unless its provider already did). Each cut is named in the
 * result's diagnostic, so the owner learns it from the result as well as from the marker.
 */
import { boundDiagnostic, capBlocks, truncationNote, TRUNCATION_MARKER, type RunEvent, type SubagentResult } from '../../protocol/index.js';
import { sessionEventJson } from '../store/session-event-json.js';

export class StreamBudget {
  private used = 0;
  private cut = false;

  constructor(readonly capBytes: number) {}

  get truncated(): boolean {
    return this.cut;
  }

  /** The event to send in place of `event`: itself, the marker (once), or nothing. */
  admit(event: RunEvent): RunEvent | undefined {
    if (this.cut) return undefined;
    const size = event.kind === 'session' ? sessionEventJson(event.event).length : !('text' in event) ? JSON.stringify(event).length : Buffer.byteLength(event.text, 'utf8');
    if (this.used + size <= this.capBytes) {
      this.used += size;
      return event;
    }
    this.cut = true;
    return { kind: 'text-delta', text: TRUNCATION_MARKER };
  }
}

/** The result as it leaves the daemon: output within `cap`, and every cut named in the diagnostic. */
export function boundedResult(result: SubagentResult, capBytes: number, streamCut: boolean): SubagentResult {
  const output = capBlocks(result.output, capBytes);
  if (!output.truncated && !streamCut) return result;
  // A provider may cut its output to the cap itself, where its text is (an ACP turn does: its
  // result is then the answer's only copy), naming the cut first: the note keeps its place.
  const outputNote = truncationNote('output', capBytes);
  const named = result.diagnostic?.startsWith(outputNote) === true;
  const rest = named ? result.diagnostic?.slice(outputNote.length).replace(/^; /, '') : result.diagnostic;
  // The cuts first: bounding the diagnostic to its 4 KiB must never drop what was cut.
  const notes = [output.truncated || named ? outputNote : undefined, streamCut ? truncationNote('event stream', capBytes) : undefined, rest];
  return { ...result, output: output.blocks, diagnostic: boundDiagnostic(notes.filter((note) => note !== undefined && note !== '').join('; ')) };
}
