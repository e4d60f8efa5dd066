/**
 * The run archive: settled and disposed run records kept on disk, out of memory. Two files:
 * `runs.archive.jsonl` (one JSON record a line, append-only, in archive order) and a sidecar
 * offset index `runs.archive.idx` (12 bytes a line: FNV-1a hash of the run id, byte offset).
 * Opening reads only the sidecar (12 bytes a run), never the records; a record is read when
 * asked for (`get`) or when a listing walks past it (`newestFirst`, backwards in blocks).
 *
 * Rules and failures:
 * - A run may appear more than once (archived again after a change, or a crash between the
 *   archive write and the run log's rewrite): the last line wins, earlier ones are skipped.
 * - The records are written before their index entries. At open, lines past the last indexed one
 *   are indexed (a crash between the two writes), a torn last line is cut off (its record is
 *   still in the run log, which is rewritten only after the archive), and a missing or torn
 *   sidecar is rebuilt from the records.
 * - `rewrite` (retention) removes the sidecar before it swaps the records file, so a crash in
 *   between leaves no stale offsets: the next open rebuilds the sidecar.
 * - A line that no longer parses is skipped and counted in `unreadable`, never fatal.
 */
import { closeSync, existsSync, fstatSync, ftruncateSync, openSync, readSync, renameSync, rmSync, writeSync } from '../../common/node-builtins.js';
import { readStoredRun, type IndexedRun } from './indexed-run.js';

const ENTRY = 12;
const BLOCK_ENTRIES = 256;
const SCAN_CHUNK = 1 << 20;
const WRITE_CHUNK = 1 << 20;

export class RunArchive {
  private hashes = new Uint32Array(1024);
  private offsets = new Float64Array(1024);
  private length = 0;
  private size = 0;
  private fd: number;
  private idxFd: number;
  /** Lines skipped because they did not parse (reported, never fatal). */
  unreadable = 0;

  constructor(private readonly path: string) {
    this.fd = openSync(path, existsSync(path) ? 'r+' : 'w+', 0o600);
    this.size = fstatSync(this.fd).size;
    this.loadSidecar();
    this.idxFd = openSync(this.idxPath, 'a', 0o600);
    this.indexUnindexedTail();
  }

  get count(): number {
    return this.length;
  }

  /** Appends records (whole lines, about WRITE_CHUNK bytes a write), then their index entries in one write. */
  append(runs: readonly IndexedRun[]): void {
    if (runs.length === 0) return;
    const entries = Buffer.alloc(ENTRY * runs.length);
    let at = this.size;
    // Written in chunks of about WRITE_CHUNK bytes: a pass can move many large records, and one
    // buffer of them all would be a transient allocation of that size (malloc keeps such memory).
    let chunk: string[] = [];
    let chunkAt = at;
    runs.forEach((run, i) => {
      const line = `${JSON.stringify(run)}\n`;
      entries.writeUInt32LE(hashOf(run.runId), i * ENTRY);
      entries.writeDoubleLE(at, i * ENTRY + 4);
      at += Buffer.byteLength(line);
      chunk.push(line);
      if (at - chunkAt >= WRITE_CHUNK || i === runs.length - 1) {
        writeAll(this.fd, Buffer.from(chunk.join('')), chunkAt);
        chunk = [];
        chunkAt = at;
      }
    });
    writeSync(this.idxFd, entries);
    for (let i = 0; i < runs.length; i++) this.push(entries.readUInt32LE(i * ENTRY), entries.readDoubleLE(i * ENTRY + 4));
    this.size = at;
  }

  /** The newest record of a run, or undefined. Scans the in-memory hashes, reads only matches. */
  get(runId: string): IndexedRun | undefined {
    const hash = hashOf(runId);
    for (let i = this.length - 1; i >= 0; i--) {
      if (this.hashes[i] !== hash) continue;
      const run = this.parse(this.readLines(i, i)[0]!);
      if (run?.runId === runId) return run;
    }
    return undefined;
  }

  /** Every run's newest record, newest archived first; reads blocks backwards as it is iterated. */
  *newestFirst(): Generator<IndexedRun> {
    const seen = new Set<string>();
    for (let high = this.length - 1; high >= 0; high -= BLOCK_ENTRIES) {
      const low = Math.max(0, high - BLOCK_ENTRIES + 1);
      const lines = this.readLines(low, high);
      for (let i = lines.length - 1; i >= 0; i--) {
        const run = this.parse(lines[i]!);
        if (!run || seen.has(run.runId)) continue;
        seen.add(run.runId);
        yield run;
      }
    }
  }

  /**
   * Keeps the lines from `from` on (in order) for which `keep` holds, dropping the rest: the
   * retention pass. Returns how many lines it removed.
   */
  rewrite(from: number, keep: (run: IndexedRun) => boolean): number {
    const temp = `${this.path}.${process.pid}.tmp`;
    const out = openSync(temp, 'w', 0o600);
    const kept: Array<{ hash: number; offset: number }> = [];
    let written = 0;
    try {
      for (let low = from; low < this.length; low += BLOCK_ENTRIES) {
        const high = Math.min(this.length - 1, low + BLOCK_ENTRIES - 1);
        const lines = this.readLines(low, high);
        const chunk: Buffer[] = [];
        lines.forEach((line, i) => {
          const run = this.parse(line);
          if (!run || !keep(run)) return;
          const bytes = Buffer.from(`${line}\n`);
          kept.push({ hash: this.hashes[low + i]!, offset: written });
          chunk.push(bytes);
          written += bytes.length;
        });
        if (chunk.length > 0) writeSync(out, Buffer.concat(chunk));
      }
    } finally {
      closeSync(out);
    }
    const removed = this.length - kept.length;
    // Sidecar first: a crash before the new one is in place leaves none, and none is rebuilt.
    closeSync(this.idxFd);
    rmSync(this.idxPath, { force: true });
    closeSync(this.fd);
    renameSync(temp, this.path);
    const entries = Buffer.alloc(ENTRY * kept.length);
    kept.forEach(({ hash, offset }, i) => {
      entries.writeUInt32LE(hash, i * ENTRY);
      entries.writeDoubleLE(offset, i * ENTRY + 4);
    });
    const idxTemp = `${this.idxPath}.${process.pid}.tmp`;
    const idxOut = openSync(idxTemp, 'w', 0o600);
    writeSync(idxOut, entries);
    closeSync(idxOut);
    renameSync(idxTemp, this.idxPath);
    this.fd = openSync(this.path, 'r+');
    this.idxFd = openSync(this.idxPath, 'a', 0o600);
    this.size = written;
    this.length = 0;
    for (const { hash, offset } of kept) this.push(hash, offset);
    return removed;
  }

  /** The record at archive position `i` (0 is the oldest), for retention's cheap age check. */
  at(i: number): IndexedRun | undefined {
    return i >= 0 && i < this.length ? this.parse(this.readLines(i, i)[0]!) : undefined;
  }

  close(): void {
    closeSync(this.fd);
    closeSync(this.idxFd);
  }

  private get idxPath(): string {
    return this.path.replace(/\.jsonl$/, '') + '.idx';
  }

  /** The lines at positions low..high, without their newlines, in one read. */
  private readLines(low: number, high: number): string[] {
    const start = this.offsets[low]!;
    const end = high + 1 < this.length ? this.offsets[high + 1]! : this.size;
    const buffer = Buffer.alloc(end - start);
    readSync(this.fd, buffer, 0, buffer.length, start);
    const lines: string[] = [];
    for (let i = low; i <= high; i++) {
      const from = this.offsets[i]! - start;
      const to = (i + 1 <= high ? this.offsets[i + 1]! : end) - start;
      lines.push(buffer.toString('utf8', from, to - 1));
    }
    return lines;
  }

  private parse(line: string): IndexedRun | undefined {
    try {
      const run = readStoredRun(line);
      if (run) return run;
    } catch {
      // counted below
    }
    this.unreadable += 1;
    return undefined;
  }

  private push(hash: number, offset: number): void {
    if (this.length === this.hashes.length) {
      const hashes = new Uint32Array(this.length * 2);
      hashes.set(this.hashes);
      this.hashes = hashes;
      const offsets = new Float64Array(this.length * 2);
      offsets.set(this.offsets);
      this.offsets = offsets;
    }
    this.hashes[this.length] = hash;
    this.offsets[this.length] = offset;
    this.length += 1;
  }

  /** Reads the sidecar in chunks straight into the typed arrays (no whole-file buffer kept). */
  private loadSidecar(): void {
    if (!existsSync(this.idxPath)) return;
    const fd = openSync(this.idxPath, 'r+');
    try {
      const fileSize = fstatSync(fd).size;
      const whole = Math.floor(fileSize / ENTRY);
      this.hashes = new Uint32Array(whole + 1024);
      this.offsets = new Float64Array(whole + 1024);
      const chunk = Buffer.alloc(ENTRY * 8192);
      for (let read = 0; read < whole; ) {
        const count = Math.min(8192, whole - read);
        readSync(fd, chunk, 0, count * ENTRY, read * ENTRY);
        for (let i = 0; i < count; i++) {
          const offset = chunk.readDoubleLE(i * ENTRY + 4);
          // Entries past the records (a sidecar newer than its file) are dropped and re-derived.
          if (offset >= this.size) {
            read = whole;
            break;
          }
          this.push(chunk.readUInt32LE(i * ENTRY), offset);
        }
        read += count;
      }
      if (this.length * ENTRY !== fileSize) ftruncateSync(fd, this.length * ENTRY);
    } finally {
      closeSync(fd);
    }
  }

  /** Indexes whole lines after the last indexed one; cuts a torn last line off the records. */
  private indexUnindexedTail(): void {
    let at = this.length > 0 ? this.offsets[this.length - 1]! : 0;
    let skipFirst = this.length > 0;
    const fresh: Array<{ hash: number; offset: number }> = [];
    let carry = Buffer.alloc(0);
    let carryAt = at;
    while (at < this.size) {
      const chunk = Buffer.alloc(Math.min(SCAN_CHUNK, this.size - at));
      readSync(this.fd, chunk, 0, chunk.length, at);
      at += chunk.length;
      const data = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
      let lineStart = 0;
      for (let nl = data.indexOf(10); nl !== -1; nl = data.indexOf(10, lineStart)) {
        if (skipFirst) skipFirst = false;
        else {
          const run = this.parse(data.toString('utf8', lineStart, nl));
          fresh.push({ hash: run ? hashOf(run.runId) : 0, offset: carryAt + lineStart });
        }
        lineStart = nl + 1;
      }
      carry = data.subarray(lineStart);
      carryAt += lineStart;
    }
    if (carry.length > 0) {
      ftruncateSync(this.fd, carryAt);
      this.size = carryAt;
      // The cut line may have been indexed already (its entry then points past the end).
      while (this.length > 0 && this.offsets[this.length - 1]! >= this.size) this.length -= 1;
      ftruncateSync(this.idxFd, this.length * ENTRY);
    }
    if (fresh.length === 0) return;
    const entries = Buffer.alloc(ENTRY * fresh.length);
    fresh.forEach(({ hash, offset }, i) => {
      entries.writeUInt32LE(hash, i * ENTRY);
      entries.writeDoubleLE(offset, i * ENTRY + 4);
      this.push(hash, offset);
    });
    writeSync(this.idxFd, entries);
  }
}

/** FNV-1a over UTF-16 code units: a cheap filter, confirmed by reading the record. */
export function hashOf(runId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < runId.length; i++) {
    hash ^= runId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

function writeAll(fd: number, buffer: Buffer, position: number): void {
  let done = 0;
  while (done < buffer.length) done += writeSync(fd, buffer, done, buffer.length - done, position + done);
}
