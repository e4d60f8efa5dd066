/** What the figures were measured on. */
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';

export interface Machine {
  readonly nproc: number;
  readonly cpu: string;
  readonly node: string;
  readonly memory: string;
  readonly date: string;
  readonly loadStart: string;
}

export const formatLoad = (): string => loadavg().map((x) => x.toFixed(2)).join(' / ');

export function machine(): Machine {
  return {
    nproc: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    memory: `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    date: new Date().toISOString(),
    loadStart: formatLoad(),
  };
}
