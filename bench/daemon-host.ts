/**
 * The daemon CLI (dist/cli/main.js) unchanged, plus one hook for memory measurements: on
 * SIGUSR2 it runs a full garbage collection and reports its memory on stderr, so the bench can
 * compare live memory rather than whatever garbage happens to be uncollected.
 *   node --expose-gc dist/bench/daemon-host.js daemon --socket S --state-dir D --config C
 */
const gc = (globalThis as { gc?: () => void }).gc;
process.on('SIGUSR2', () => {
  gc?.();
  gc?.();
  const memory = process.memoryUsage();
  process.stderr.write(`bench-gc rss=${memory.rss} heapUsed=${memory.heapUsed}\n`);
});
await import('../cli/main.js');
