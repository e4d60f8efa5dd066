/**
 * How much of a run's output crosses the wire and is kept, on both sides, and how a cut shows.
 * One home for the numbers and the marker text: the daemon cuts a run's output, its event
 * stream and its stored record with these; the client's inbound schemas accept text blocks up
 * to MAX_TEXT_BYTES, which every daemon cap stays below, so a capped answer always validates.
 *
 * A cut keeps whole UTF-8 characters, ends with TRUNCATION_MARKER, and the run's diagnostic says
 * what was cut (truncationNote). Nothing is cut silently.
 */

/** The largest text block either side accepts (a run's output, a delta, a tool argument). */
export const MAX_TEXT_BYTES = 16 * 1024 * 1024;
/** Default cap on a run's output and, separately, on the bytes of its event stream. */
export const DEFAULT_MAX_OUTPUT_BYTES = 2 * 1024 * 1024;
/** Default cap on the output kept in a run's stored record (the run index line). */
export const DEFAULT_MAX_STORED_OUTPUT_BYTES = 256 * 1024;
/** Appended where text was cut. */
export const TRUNCATION_MARKER = '\n...[truncated by subagentd]';

/** What the diagnostic says about a cut: which part, at which cap. */
export function truncationNote(what: 'output' | 'event stream' | 'stored output', capBytes: number): string {
  return `${what} truncated at ${capBytes} bytes (the daemon's cap); the text ends with "${TRUNCATION_MARKER.trim()}"`;
}

/** `text` cut to at most `maxBytes` of UTF-8 (marker included), on a character boundary. */
export function capText(text: string, maxBytes: number): { text: string; truncated: boolean } {
  // Cheap exit: a UTF-16 length within a third of the cap cannot exceed it in UTF-8.
  if (text.length * 3 <= maxBytes || Buffer.byteLength(text, 'utf8') <= maxBytes) return { text, truncated: false };
  const room = Math.max(0, maxBytes - Buffer.byteLength(TRUNCATION_MARKER, 'utf8'));
  // A prefix of one-byte characters is cut where it stands: the slice shares the text's memory,
  // where a round trip through a Buffer would hold a second copy of a cut output as long as its run.
  const prefix = text.slice(0, room);
  if (Buffer.byteLength(prefix, 'utf8') === prefix.length) return { text: prefix + TRUNCATION_MARKER, truncated: true };
  const bytes = Buffer.from(prefix, 'utf8');
  let end = Math.min(room, bytes.length);
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return { text: bytes.subarray(0, end).toString('utf8') + TRUNCATION_MARKER, truncated: true };
}

interface Block {
  readonly type: string;
  readonly text?: string;
  readonly data?: string;
}

/**
 * Content blocks cut to `maxBytes` in total (text bytes, plus the data of other blocks): blocks
 * after the budget is spent are dropped, and the block where it runs out ends with the marker.
 */
export function capBlocks<B extends Block>(blocks: readonly B[], maxBytes: number): { blocks: B[]; truncated: boolean } {
  let left = maxBytes;
  const out: B[] = [];
  for (const block of blocks) {
    const size = blockBytes(block);
    if (size <= left) {
      out.push(block);
      left -= size;
      continue;
    }
    if (block.type === 'text') out.push({ ...block, text: capText(block.text ?? '', Math.max(left, Buffer.byteLength(TRUNCATION_MARKER))).text });
    else out.push({ type: 'text', text: TRUNCATION_MARKER } as unknown as B);
    return { blocks: out, truncated: true };
  }
  return { blocks: out, truncated: false };
}

/** What a block counts against an output cap: its text's UTF-8 bytes, or its data's length. */
export function blockBytes(block: Block): number {
  return block.type === 'text' ? Buffer.byteLength(block.text ?? '', 'utf8') : (block.data?.length ?? 0);
}

/** The bytes of content blocks as the output caps count them. */
export function blocksBytes(blocks: readonly Block[]): number {
  let bytes = 0;
  for (const block of blocks) bytes += blockBytes(block);
  return bytes;
}
