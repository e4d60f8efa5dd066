/** A small table that renders both as aligned text (console) and as Markdown (BENCHMARKS.md). */

export class Table {
  readonly rows: string[][] = [];
  readonly notes: string[] = [];

  constructor(
    readonly title: string,
    readonly headers: readonly string[],
  ) {}

  row(...cells: Array<string | number>): this {
    this.rows.push(cells.map(String));
    return this;
  }

  note(text: string): this {
    this.notes.push(text);
    return this;
  }

  toText(): string {
    const all = [this.headers, ...this.rows];
    const widths = this.headers.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
    const line = (cells: readonly string[]): string =>
      cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
    const out = [`  ${this.title}`, `  ${line(this.headers)}`, `  ${widths.map((w) => '-'.repeat(w)).join('  ')}`];
    for (const r of this.rows) out.push(`  ${line(r)}`);
    for (const n of this.notes) out.push(`  * ${n}`);
    return out.join('\n');
  }

  toMarkdown(): string {
    const esc = (cell: string): string => cell.replace(/\|/g, '\\|');
    const out = [`**${this.title}**`, '', `| ${this.headers.map(esc).join(' | ')} |`];
    out.push(`|${this.headers.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`);
    for (const r of this.rows) out.push(`| ${r.map(esc).join(' | ')} |`);
    if (this.notes.length > 0) out.push('', ...this.notes.map((n) => `- ${n}`));
    return out.join('\n');
  }
}
