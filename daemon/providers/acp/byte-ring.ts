/**
 * The last `capacity` bytes of a stream (an agent's stderr), so a failure report can quote what
 * the agent said just before it died without the daemon holding an unbounded log.
 */
export class ByteRing {
  private data: Buffer = Buffer.alloc(0);

  constructor(readonly capacity: number) {}

  push(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    if (chunk.byteLength >= this.capacity) {
      this.data = Buffer.from(chunk.subarray(chunk.byteLength - this.capacity));
      return;
    }
    const joined = Buffer.concat([this.data, chunk]);
    // Copy when trimming so the ring never pins a larger backing buffer.
    this.data = joined.byteLength > this.capacity ? Buffer.from(joined.subarray(joined.byteLength - this.capacity)) : joined;
  }

  get byteLength(): number {
    return this.data.byteLength;
  }

  /** The last `maxBytes` (at most) as UTF-8 text, starting on a character boundary. */
  tail(maxBytes: number): string {
    let start = Math.max(0, this.data.byteLength - maxBytes);
    // Skip UTF-8 continuation bytes (10xxxxxx) left over from a character cut in half.
    while (start < this.data.byteLength && ((this.data[start] ?? 0) & 0xc0) === 0x80) start++;
    return this.data.subarray(start).toString('utf8');
  }
}
