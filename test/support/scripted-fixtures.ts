/**
 * Test fixtures for the child-agent runtime: a fake RunHost that records what the child asked of
 * it, a scripted model that also records every step request, and temp folders removed after
 * each test.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach } from 'vitest';
import type { ContentBlock, RunEvent, SessionEvent, ToolCallResult } from '../../protocol/index.js';
import type { ProviderStartRequest, RunHost } from '../../daemon/provider.js';
import type { ModelResolver, ModelStepRequest } from '../../daemon/agent/model/model-adapter.js';
import { createScriptedAdapter, type ModelScript } from '../../daemon/agent/model/scripted.js';
import type { InProcessProviderOptions } from '../../daemon/providers/in-process/index.js';

export const silentLog = pino({ level: 'silent' });

/** Creates temp folders that are removed after the current test. */
export function useTempDirs(): (prefix?: string) => Promise<string> {
  const made: string[] = [];
  afterEach(async () => {
    await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });
  return async (prefix = 'subagentd-') => {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}

export interface ToolCallRecord {
  readonly callId: string;
  readonly name: string;
  readonly arguments: unknown;
}

export interface FakeHost extends RunHost {
  readonly toolCalls: ToolCallRecord[];
  readonly emitted: RunEvent[];
  sessionEvents(): SessionEvent[];
}

export function fakeHost(
  onToolCall: (call: ToolCallRecord, signal: AbortSignal) => Promise<ToolCallResult> = async () => ({
    content: [{ type: 'text', text: 'client tool ok' }],
  }),
): FakeHost {
  const toolCalls: ToolCallRecord[] = [];
  const emitted: RunEvent[] = [];
  return {
    runId: 'run-test',
    toolCalls,
    emitted,
    log: silentLog,
    callTool(call, signal) {
      toolCalls.push(call);
      return onToolCall(call, signal);
    },
    askPermission: async () => ({ outcome: 'cancelled' }),
    emit(event) {
      emitted.push(event);
    },
    sessionEvents() {
      return emitted.flatMap((e) => (e.kind === 'session' ? [e.event] : []));
    },
  };
}

export interface StepRecord {
  readonly system: string;
  readonly tools: string[];
  readonly toolParameters: Record<string, Record<string, unknown>>;
  readonly events: SessionEvent[];
}

/** A resolver serving the scripted adapter, recording a snapshot of every step request. */
export function scriptedModel(script: ModelScript): { resolve: ModelResolver; steps: StepRecord[]; names: (string | undefined)[] } {
  const adapter = createScriptedAdapter(script);
  const steps: StepRecord[] = [];
  const names: (string | undefined)[] = [];
  const recording = {
    name: adapter.name,
    step(request: ModelStepRequest) {
      steps.push({
        system: request.system,
        tools: request.tools.map((t) => t.name),
        toolParameters: Object.fromEntries(request.tools.map((t) => [t.name, t.parameters])),
        events: structuredClone([...request.events]),
      });
      return adapter.step(request);
    },
  };
  return {
    steps,
    names,
    resolve: (name) => {
      names.push(name);
      return { adapter: recording, model: name ?? 'scripted-test' };
    },
  };
}

export function text(value: string): ContentBlock[] {
  return [{ type: 'text', text: value }];
}

export function providerOptions(
  sessionsDir: string,
  resolveModel: ModelResolver,
  overrides: Partial<InProcessProviderOptions> = {},
): InProcessProviderOptions {
  return { sessionsDir, resolveModel, policy: { write: false, shell: false }, log: silentLog, ...overrides };
}

export function startRequest(
  cwd: string,
  host: RunHost,
  overrides: Partial<ProviderStartRequest> = {},
): ProviderStartRequest {
  return {
    prompt: text('do the task'),
    parent: { sessionId: 'parent-session', cwd },
    childDepth: 1,
    signal: new AbortController().signal,
    host,
    ...overrides,
  };
}

/** The tool results a run produced, by tool name, in order. */
export function toolResults(events: readonly SessionEvent[]): Array<{ name: string; isError: boolean; text: string }> {
  return events.flatMap((e) =>
    e.type === 'tool/result'
      ? [{ name: e.name, isError: e.isError, text: e.content.map((b) => (b.type === 'text' ? b.text : '')).join('') }]
      : [],
  );
}

/** Polls until `check` holds; fails after `timeoutMs`. */
export async function waitFor(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
