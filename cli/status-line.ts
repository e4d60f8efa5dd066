/**
 * One live line on a terminal's stderr, rewritten in place (carriage return + erase line), cut to
 * the terminal's width so it never wraps, with the elapsed time refreshed each second. Only for a
 * TTY: piped output never sees control codes. `clear()` leaves the line empty for what follows.
 */
import type { WriteStream } from 'node:tty';

const ERASE_LINE = '\r\x1b[2K';

export class StatusLine {
  private text = '';
  private readonly started = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly out: WriteStream) {
    this.timer = setInterval(() => this.draw(), 1000);
    this.timer.unref();
  }

  set(text: string): void {
    this.text = text;
    this.draw();
  }

  clear(): void {
    clearInterval(this.timer);
    this.out.write(ERASE_LINE);
  }

  private draw(): void {
    const elapsed = `${Math.floor((Date.now() - this.started) / 1000)}s`;
    const width = Math.max(20, (this.out.columns || 80) - 1);
    const line = `${elapsed} ${this.text}`;
    this.out.write(ERASE_LINE + (line.length > width ? `${line.slice(0, width - 1)}…` : line));
  }
}
