/**
 * Collects what the run measured: printed to the console as each table completes, and written
 * to BENCHMARKS.md at the end (the same figures).
 */
import type { Table } from './table.js';

export interface Verdict {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean;
}

interface Section {
  readonly title: string;
  readonly blocks: Array<{ kind: 'text'; text: string } | { kind: 'table'; table: Table }>;
}

export class Report {
  private readonly sections: Section[] = [];
  readonly verdicts: Verdict[] = [];
  readonly failures: string[] = [];

  section(title: string, intro?: string): void {
    this.sections.push({ title, blocks: intro ? [{ kind: 'text', text: intro }] : [] });
    console.log(`\n== ${title} ==`);
    if (intro) console.log(wrap(intro));
  }

  text(text: string): void {
    this.current().blocks.push({ kind: 'text', text });
    console.log(wrap(text));
  }

  table(table: Table): void {
    this.current().blocks.push({ kind: 'table', table });
    console.log(`\n${table.toText()}`);
  }

  /** A progress line on the console only (long sections on a slow machine). */
  progress(text: string): void {
    console.log(`  … ${text}`);
  }

  verdict(target: string, measured: string, met: boolean): void {
    this.verdicts.push({ target, measured, met });
    console.log(`  target ${met ? 'MET   ' : 'MISSED'}: ${target} (measured ${measured})`);
  }

  failure(section: string, error: unknown): void {
    const text = `${section}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
    this.failures.push(text);
    console.error(`!! ${text}`);
  }

  markdownSections(): string {
    const out: string[] = [];
    for (const section of this.sections) {
      out.push(`## ${section.title}`, '');
      for (const block of section.blocks) {
        out.push(block.kind === 'text' ? block.text : block.table.toMarkdown(), '');
      }
    }
    return out.join('\n');
  }

  private current(): Section {
    const last = this.sections[this.sections.length - 1];
    if (!last) throw new Error('report: no section open');
    return last;
  }
}

function wrap(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}
