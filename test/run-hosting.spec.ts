/** The per-run host's ordering rule: events and the settle wait for the start answer, in order. */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { RunEventParams } from '../protocol/index.js';
import { OwnedRunHost } from '../daemon/service/run-hosting.js';
import type { RunOwner } from '../daemon/service/run-ownership.js';

function recordingOwner(seen: string[], open = true): RunOwner {
  return {
    id: 'owner',
    open,
    notifyStart: () => undefined,
    notifyEnd: () => undefined,
    notifyRunEvent: ({ runId, event }: RunEventParams) => void seen.push(`${runId}:${event.kind === 'text-delta' ? event.text : event.kind}`),
    callTool: () => Promise.reject(new Error('no tools')),
    askPermission: () => Promise.resolve({ outcome: 'cancelled' }),
  };
}

const delta = (text: string) => ({ kind: 'text-delta' as const, text });
const silent = pino({ level: 'silent' });

describe('OwnedRunHost', () => {
  it('holds events and the settle until answered, then sends the events first, in order', () => {
    const seen: string[] = [];
    const host = new OwnedRunHost('r1', recordingOwner(seen), true, silent, 'spawn', 1 << 20);
    host.emit(delta('a'));
    host.afterAnswer(() => seen.push('settle'));
    host.emit(delta('b'));
    expect(seen).toEqual([]);
    host.answered();
    expect(seen).toEqual(['r1:a', 'r1:b', 'settle']);
    host.emit(delta('c'));
    expect(seen).toEqual(['r1:a', 'r1:b', 'settle', 'r1:c']);
  });

  it('holds a permission prompt made before the answer until the answer is out, then asks under the run id', async () => {
    const seen: string[] = [];
    const owner: RunOwner = {
      ...recordingOwner(seen),
      askPermission: (params) => {
        seen.push(`ask:${params.runId}`);
        return Promise.resolve({ outcome: 'cancelled' });
      },
    };
    const host = new OwnedRunHost('r1', owner, true, silent, 'spawn', 1 << 20);
    const asked = host.askPermission({ toolCall: { toolCallId: 't1', title: 'Edit' }, options: [] } as never, new AbortController().signal);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([]);
    host.answered();
    await expect(asked).resolves.toEqual({ outcome: 'cancelled' });
    expect(seen).toEqual(['ask:r1']);
  });

  it('settles at once once answered, and answering twice sends nothing twice', () => {
    const seen: string[] = [];
    const host = new OwnedRunHost('r1', recordingOwner(seen), true, silent, 'spawn', 1 << 20);
    host.emit(delta('a'));
    host.answered();
    host.answered();
    host.afterAnswer(() => seen.push('settle'));
    expect(seen).toEqual(['r1:a', 'settle']);
  });

  it('a resumption re-arms it under the new run id, closed again', () => {
    const seen: string[] = [];
    const owner = recordingOwner(seen);
    const host = new OwnedRunHost('r1', owner, false, silent, 'spawn', 1 << 20);
    host.answered();
    host.rearm('r2', owner, true);
    host.emit(delta('x'));
    expect(seen).toEqual([]);
    host.answered();
    expect(seen).toEqual(['r2:x']);
  });

  it('streams nothing when not asked, or to an owner that is gone', () => {
    const seen: string[] = [];
    const quiet = new OwnedRunHost('r1', recordingOwner(seen), false, silent, 'spawn', 1 << 20);
    quiet.answered();
    quiet.emit(delta('a'));
    const gone = new OwnedRunHost('r2', recordingOwner(seen, false), true, silent, 'spawn', 1 << 20);
    gone.answered();
    gone.emit(delta('b'));
    expect(seen).toEqual([]);
  });
});
