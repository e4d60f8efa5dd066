/** The ops commands: start, stop, restart, status, runs, inspect, logs (`runs` and `inspect` also without a daemon). */
import { existsSync, readFileSync, statSync, watchFile, unwatchFile, openSync, readSync, closeSync } from 'node:fs';
import type { SessionEvent, SessionHeader } from '../protocol/index.js';
import { SubagentError, type RunInfo, type RunsListResult, type RunState, type StatusResult } from '../protocol/index.js';
import type { RemoteSubagentService } from '../client/index.js';
import { ConfigError } from '../daemon/config.js';
import { ensureDaemon } from '../client/auto-start.js';
import { stopDaemon, type StopOutcome } from '../client/stop-daemon.js';
import type { CommonSettings } from './options.js';
import { stateFiles } from '../daemon/ops/paths.js';
import type { DaemonOps } from '../client/daemon-ops.js';
import { openClient } from './daemon-client.js';
import { bytes, duration, since, table } from './format.js';

const print = (text: string): void => void process.stdout.write(`${text}\n`);

/** An explicit start: never held back by the auto-start crash-loop guard. */
async function startDaemon(settings: CommonSettings): Promise<{ outcome: 'started' | 'running'; pid: number }> {
  const outcome = await ensureDaemon({
    socket: settings.socket,
    stateDir: settings.stateDir,
    explicit: true,
    ...(settings.configPath !== undefined && { config: settings.configPath }),
  });
  const client = await openClient(settings, { autoStart: false });
  const { pid } = client.daemon;
  await client.close();
  return { outcome, pid };
}

const startedLine = ({ outcome, pid }: { outcome: string; pid: number }, socket: string): string =>
  outcome === 'started' ? `subagentd started (pid ${pid}) on ${socket}` : `subagentd already running (pid ${pid}) on ${socket}`;

export async function startCommand(settings: CommonSettings): Promise<number> {
  const started = await startDaemon(settings);
  print(settings.json ? JSON.stringify({ ...started, socket: settings.socket }) : startedLine(started, settings.socket));
  return 0;
}

/** Stops the daemon and returns once its process has exited (socket and lock free). */
async function stopAndWait(settings: CommonSettings, drain: boolean, timeoutS: number): Promise<StopOutcome | undefined> {
  return stopDaemon({
    socket: settings.socket,
    drain,
    timeoutMs: timeoutS * 1000,
    onShutdownAccepted: (pid) => {
      if (drain && !settings.json) print(`draining (pid ${pid}): new starts are refused; running children get up to ${timeoutS} s`);
    },
  });
}

const stoppedLine = (stopped: StopOutcome): string =>
  `subagentd stopped (pid ${stopped.pid})${stopped.forced ? `: it did not exit by itself, ended with ${stopped.forced}` : ''}`;

export async function stopCommand(settings: CommonSettings, drain: boolean, timeoutS: number): Promise<number> {
  const stopped = await stopAndWait(settings, drain, timeoutS);
  if (settings.json) print(JSON.stringify({ stopped: stopped ?? null, ...(stopped === undefined && { socket: settings.socket }) }));
  else print(stopped ? stoppedLine(stopped) : `no daemon running at ${settings.socket}`);
  return 0;
}

/** Drain (running children continue in the next daemon), wait for the exit, start again. */
export async function restartCommand(settings: CommonSettings, timeoutS: number): Promise<number> {
  const stopped = await stopAndWait(settings, true, timeoutS);
  if (!settings.json) print(stopped ? stoppedLine(stopped) : `no daemon was running at ${settings.socket}`);
  const started = await startDaemon(settings);
  print(settings.json ? JSON.stringify({ stopped: stopped ?? null, started: { ...started, socket: settings.socket } }) : startedLine(started, settings.socket));
  return 0;
}

/** `subagentd ui`: the daemon serves the page; this prints the URL with its one-time token. */
export async function uiCommand(settings: CommonSettings): Promise<number> {
  const client = await openClient(settings, { autoStart: true });
  try {
    const { url } = await client.ops.ui();
    print(settings.json ? JSON.stringify({ url }) : `Open the subagentd web view (the link works once):\n\n    ${url}\n`);
    return 0;
  } finally {
    await client.close();
  }
}

export async function statusCommand(settings: CommonSettings): Promise<number> {
  const client = await openClient(settings, { autoStart: false });
  try {
    const status = await client.ops.status();
    if (settings.json) {
      print(JSON.stringify(status, null, 2));
      return 0;
    }
    const { daemon, runs, admission } = status;
    print(`subagentd ${daemon.version}  pid ${daemon.pid}  up ${duration(status.uptimeMs)}${status.shuttingDown ? '  (shutting down)' : ''}`);
    print(
      table(
        ['', ''],
        [
          ['socket', status.socket ?? settings.socket],
          ['state dir', status.stateDir],
          ['protocol', status.protocolVersion],
          ['connections', String(status.connections)],
          ['runs', `starting ${runs.starting}  running ${runs.running}  settled ${runs.settled}  disposed ${runs.disposed}`],
          ['slots', `${admission.roots ?? admission.running} roots, ${admission.descendants ?? 0} descendants on their parents' slots, ${admission.descendantsWaiting ?? 0} waiting for a parent's slot`],
          ...(admission.execution
            ? [['execution', `${admission.execution.held} of ${admission.execution.slots} slots held here, ${admission.execution.lent} nested runs on a slot their parent lent`]]
            : []),
          ['queue', `${admission.queued} waiting; limits ${admission.limits.maxConcurrentRuns} runs, ${admission.limits.maxRunsPerConnection} per connection, ${admission.limits.maxQueued} queued`],
          ['providers', status.providers.join(', ')],
          ...(status.shell ? [['shell', status.shell === 'unsandboxed' ? 'unsandboxed (tools.shellUnsandboxed: commands see everything the daemon sees)' : 'sandboxed (bubblewrap)']] : []),
          ...settingsRows(status),
          ['memory', `rss ${bytes(status.memory.rss)}  heap ${bytes(status.memory.heapUsed)}`],
          ...spinRow(status),
        ],
      )
        .split('\n')
        .slice(1)
        .join('\n'),
    );
    const shares = Object.entries(admission.byConnection);
    if (shares.length > 0) {
      print(table(['CONNECTION', 'CLIENT', 'RUNNING', 'QUEUED'], shares.map(([id, s]) => [id.slice(0, 8), s.client ?? '-', String(s.running), String(s.queued)])));
    }
    const endpoints = status.endpoints ?? [];
    if (endpoints.length > 0) {
      print(
        table(
          ['ENDPOINT', 'LIMIT', 'IN FLIGHT', 'WAITING', '429/503 (1 MIN)', 'TOKENS/MIN'],
          endpoints.map((e) => [
            `${e.endpoint}${e.pausedUntil ? ` (paused until ${e.pausedUntil})` : ''}`,
            `${e.limit}${e.maxConcurrent !== undefined ? ` of ${e.maxConcurrent}` : ''}`,
            String(e.inFlight),
            String(e.waiting),
            String(e.throttledLastMinute),
            `${e.tokensPerMinute}${e.tokensPerMinuteLimit !== undefined ? ` of ${e.tokensPerMinuteLimit}` : ''}`,
          ]),
        ),
      );
    }
    return 0;
  } finally {
    await client.close();
  }
}

/** What polling after client traffic has cost so far (absent when it is off). */
function spinRow(status: StatusResult): string[][] {
  const spin = status.pollSpin;
  if (!spin) return [];
  return [['poll spin', `${spin.windowMicros} µs windows: ${spin.windows} spun, ${spin.caught} caught a message, ${Math.round(spin.spunMs)} ms of CPU in all`]];
}

function settingsRows(status: StatusResult): string[][] {
  const config = status.config;
  if (!config) return [];
  const { model } = config;
  const endpoint = model.problem
    ? `misconfigured: ${model.problem}`
    : model.endpoint
      ? `${model.endpoint}  model ${model.model ?? '-'}  key ${model.apiKey}`
      : 'none configured (runs need --model scripted:FILE)';
  return [
    ['config', `${config.path ?? '(none)'}  loaded ${config.loadedAt}${config.generation > 0 ? ` (reload ${config.generation})` : ''}`],
    ['env file', `${config.envFile}${config.envFileLoaded ? '' : ' (absent)'}`],
    ['model', endpoint],
    ...(config.restartNeeded.length > 0 ? [['restart needed', `changed: ${config.restartNeeded.join(', ')}`]] : []),
    ...Object.entries(config.agents ?? {}).map(([name, p]) => [
      `agents ${name}`,
      `${p.inUse} in use, ${p.ready} warm ready, ${p.warming} warming (warm ${p.warm}${p.maxProcesses !== undefined ? `, max ${p.maxProcesses}` : ''})` +
        `  starts ${p.warmStarts} warm / ${p.coldStarts} cold, ${p.reaped} reaped, ${p.reused} reused${p.lastError ? `  last warm-up error: ${p.lastError}` : ''}`,
    ]),
  ];
}

/**
 * Re-read the daemon's config and environment file (SIGHUP to its pid: same user, same machine),
 * and wait until it has tried. A failed reload leaves the old settings and is an error here.
 */
export async function gcCommand(settings: CommonSettings): Promise<number> {
  const client = await openClient(settings, { autoStart: false });
  try {
    const done = await client.ops.gc();
    if (settings.json) print(JSON.stringify(done));
    else print(`archived ${done.runsArchived} runs, removed ${done.runsRemoved} runs and ${done.sessionsRemoved} session logs; ${done.runsStored} runs stored`);
    return 0;
  } finally {
    await client.close();
  }
}

/** The operator's cancel of any live run (`daemon/cancel`), descendants included. */
export async function cancelCommand(settings: CommonSettings, runId: string, afterStep: boolean): Promise<number> {
  const client = await openClient(settings, { autoStart: false });
  try {
    await client.ops.cancel({ runId, level: afterStep ? 'after-step' : 'now' });
    print(settings.json ? JSON.stringify({ runId, cancelled: true }) : `cancelled ${runId}${afterStep ? ' (after its current step)' : ''}`);
    return 0;
  } finally {
    await client.close();
  }
}

export async function reloadCommand(settings: CommonSettings): Promise<number> {
  const client = await openClient(settings, { autoStart: false });
  try {
    const before = await client.ops.status();
    if (!before.config) throw new SubagentError('UNSUPPORTED_OPERATION', `the daemon at ${settings.socket} has no reloadable settings (an embedded daemon)`);
    try {
      process.kill(before.daemon.pid, 'SIGHUP');
    } catch (error) {
      throw new SubagentError(
        'DAEMON_UNAVAILABLE',
        `cannot signal daemon pid ${before.daemon.pid} (${(error as NodeJS.ErrnoException).code}): is it in another pid namespace? Send it SIGHUP where it runs`,
      );
    }
    const deadline = Date.now() + 10_000;
    let after = await client.ops.status();
    while ((after.config?.reloadAttempts ?? 0) <= before.config.reloadAttempts) {
      if (Date.now() > deadline) throw new SubagentError('DAEMON_UNRESPONSIVE', `daemon pid ${before.daemon.pid} did not reload within 10 s; see \`subagentd logs\``);
      await new Promise((r) => setTimeout(r, 50));
      after = await client.ops.status();
    }
    const config = after.config!;
    if (config.reloadError !== undefined) throw new ConfigError(`reload failed, the previous settings stay in force: ${config.reloadError}`);
    if (settings.json) print(JSON.stringify({ reloaded: config }));
    else {
      print(`subagentd reloaded (pid ${after.daemon.pid}); new runs use:`);
      print(table(['', ''], settingsRows(after)).split('\n').slice(1).join('\n'));
    }
    return 0;
  } finally {
    await client.close();
  }
}

export async function runsCommand(
  settings: CommonSettings,
  filter: { state?: string; provider?: string; since?: string; limit: number; cursor?: string },
): Promise<number> {
  const params = {
    ...(filter.state !== undefined && { state: filter.state as RunState }),
    ...(filter.provider !== undefined && { provider: filter.provider }),
    ...(filter.cursor !== undefined && { cursor: filter.cursor }),
    ...(filter.since !== undefined && { since: filter.since }),
    limit: filter.limit,
  };
  const client = await clientOrOffline(settings);
  let page: RunsListResult;
  if (client) {
    try {
      page = await client.ops.runsPage(params);
    } finally {
      await client.close();
    }
  } else {
    page = await (await import('./offline-state.js')).offlineRuns(settings.stateDir, params);
  }
  const { runs, nextCursor } = page;
  if (settings.json) print(JSON.stringify(runs, null, 2));
  else if (runs.length === 0) print('no runs');
  else print(table(RUN_COLUMNS, runs.map(row)));
  // On stderr, so stdout stays one table (or one JSON array) per page.
  if (nextCursor !== undefined) process.stderr.write(`more runs: subagentd runs --cursor ${nextCursor}\n`);
  return 0;
}

/**
 * The daemon, or undefined when none runs: `runs` and `inspect` then read the state dir
 * themselves (offline-state.ts), saying so on stderr.
 */
async function clientOrOffline(settings: CommonSettings): Promise<RemoteSubagentService | undefined> {
  try {
    return await openClient(settings, { autoStart: false });
  } catch (error) {
    if (!(error instanceof SubagentError && error.code === 'DAEMON_UNAVAILABLE')) throw error;
    process.stderr.write(`${(await import('./offline-state.js')).offlineNotice(settings.stateDir)}\n`);
    return undefined;
  }
}

const RUN_COLUMNS = ['RUN', 'STATE', 'PROVIDER', 'STOP REASON', 'STARTED', 'SETTLED', 'WORKER'];
/** WORKER: the daemon executing the run, `host:pid` (a daemon older than protocol 1.3 sends none). */
const row = (r: RunInfo): string[] => [
  r.runId,
  r.state,
  r.provider,
  r.stopReason ?? '-',
  since(r.startedAt),
  since(r.settledAt),
  r.worker ? `${r.worker.host}:${r.worker.pid}` : '-',
];

export async function inspectCommand(settings: CommonSettings, runId: string, follow: boolean): Promise<number> {
  const client = await clientOrOffline(settings);
  if (!client) {
    const { run, session } = await (await import('./offline-state.js')).offlineRun(settings.stateDir, runId);
    if (settings.json) print(JSON.stringify({ run, ...session }, null, 2));
    else {
      print(table(RUN_COLUMNS, [row(run)]));
      if (session) print([describeHeader(session.header), ...session.events.map(describeEvent)].join('\n'));
    }
    return 0;
  }
  try {
    let shown = 0;
    for (;;) {
      const { run, header: liveHeader, events: liveEvents } = await client.ops.inspect(runId);
      // Not the owner: the daemon's operator read of the stored log (none for an ACP run).
      const session = liveHeader && liveEvents ? { header: liveHeader, events: liveEvents } : await storedSession(client.ops, runId);
      if (settings.json) {
        print(JSON.stringify({ run, ...session }, null, 2));
        return 0;
      }
      if (shown === 0) {
        print(table(RUN_COLUMNS, [row(run)]));
        if (session?.header) print(describeHeader(session.header));
      }
      for (const event of session?.events.slice(shown) ?? []) print(describeEvent(event));
      shown = session?.events.length ?? 0;
      if (!follow || run.state !== 'running') return 0;
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await client.close();
  }
}

/** A run's stored session log through the daemon (`daemon/session`); undefined when it keeps none. */
export async function storedSession(ops: DaemonOps, runId: string): Promise<{ header: SessionHeader; events: readonly SessionEvent[] } | undefined> {
  try {
    return await ops.session(runId);
  } catch (error) {
    if (error instanceof SubagentError && error.code === 'UNKNOWN_RUN') return undefined;
    throw error;
  }
}

const textOf = (content: ReadonlyArray<{ type: string; text?: string }>): string =>
  content.map((b) => (b.type === 'text' ? (b.text ?? '') : `[${b.type}]`)).join('');
const clip = (s: string, n = 400): string => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s);

function describeHeader(h: SessionHeader): string {
  return `session ${h.id}  provider ${h.provider}  model ${h.model ?? '-'}  depth ${h.delegationDepth}\ncwd ${h.cwd}  parent ${h.parentSession ?? '-'}  created ${h.createdAt}`;
}

function describeEvent(e: SessionEvent): string {
  const at = e.at ? `${e.at.slice(11, 19)} ` : '';
  switch (e.type) {
    case 'user/message':
      return `${at}user: ${clip(textOf(e.content))}`;
    case 'steering/message':
      return `${at}steering: ${clip(textOf(e.content))}`;
    case 'assistant/message':
      return [`${at}assistant: ${clip(textOf(e.content))}`, ...(e.toolCalls ?? []).map((c) => `    → ${c.name}(${clip(c.arguments, 200)})`)].join('\n');
    case 'tool/result':
      return `${at}  ← ${e.name}${e.isError ? ' (error)' : ''}: ${clip(textOf(e.content), 200)}`;
    case 'usage':
      return `${at}usage: prompt ${e.usage.promptTokens}, completion ${e.usage.completionTokens}, cache hit ${e.usage.cacheHitTokens}`;
    case 'turn/end':
      return `${at}turn end: ${e.reason}${e.diagnostic ? ` (${e.diagnostic})` : ''}`;
    default: {
      const unknown: never = e;
      return JSON.stringify(unknown);
    }
  }
}

/** `runId` keeps only that run's lines (every line a run's code logs carries its id). */
export async function logsCommand(settings: CommonSettings, follow: boolean, runId?: string): Promise<number> {
  const file = stateFiles(settings.stateDir).log;
  if (!existsSync(file)) throw new SubagentError('UNKNOWN_RUN', `no daemon log at ${file}: has a daemon run with --state-dir ${settings.stateDir}?`);
  const wanted = (line: string): boolean => runId === undefined || line.includes(runId) && parsedRunId(line) === runId;
  let partial = '';
  const render = (text: string): void => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? ''; // a line still being written is shown once complete
    for (const line of lines) if (line && wanted(line)) print(settings.json ? line : formatLogLine(line));
  };
  render(readFileSync(file, 'utf8'));
  if (!follow) return 0;
  let offset = statSync(file).size;
  return new Promise<number>((resolve) => {
    watchFile(file, { interval: 250 }, (current) => {
      if (current.size <= offset) return;
      const fd = openSync(file, 'r');
      const buffer = Buffer.alloc(current.size - offset);
      readSync(fd, buffer, 0, buffer.length, offset);
      closeSync(fd);
      offset = current.size;
      render(buffer.toString('utf8'));
    });
    process.once('SIGINT', () => {
      unwatchFile(file);
      resolve(0);
    });
  });
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

function parsedRunId(line: string): unknown {
  try {
    return (JSON.parse(line) as { runId?: unknown }).runId;
  } catch {
    return undefined;
  }
}

function formatLogLine(line: string): string {
  try {
    const { level, time, msg, pid: _pid, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const fields = Object.entries(rest)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    return `${new Date(Number(time)).toISOString()} ${(LEVELS[Number(level)] ?? String(level)).padEnd(5)} ${String(msg ?? '')} ${fields}`.trimEnd();
  } catch {
    return line;
  }
}
