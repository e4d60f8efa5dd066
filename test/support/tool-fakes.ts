/**
 * In-memory test doubles of the tool's service shape, for the unit tests of rules a real daemon
 * cannot be made to break on demand (a rejected result, a failing dispose, the exact request
 * object). `FakeChildren` is a double of the ContinuableChildren contract (protocol/seam.ts)
 * holding its authority rules, until the daemon's implementation is on main.
 */
import {
  SubagentError,
  type ChildListing,
  type ChildSettledNotice,
  type ContentBlock,
  type ContinuableChildren,
  type InterruptLevel,
  type SubagentResult,
  type SubagentRun,
} from '../../protocol/index.js';
import type { ToolProvider, ToolService, ToolStartRequest } from '../../tool/index.js';

type Listener = (event: never) => void;

/** A controllable run: the test settles `result` and decides how `dispose` behaves. */
export interface FakeRun extends SubagentRun<unknown> {
  readonly request: ToolStartRequest<string>;
  resolve(result: SubagentResult): void;
  reject(error: unknown): void;
  disposeCalls: number;
}

export class FakeService implements ToolService<string> {
  readonly providers = new Map<string, ToolProvider>();
  readonly runs: FakeRun[] = [];
  /** What every call of `dispose` does after being counted; also logged to `order`. */
  disposeBehaviour: () => Promise<void> = async () => undefined;
  /** What `start` does before handing out a run (e.g. wait for a signal). */
  startBehaviour: (request: ToolStartRequest<string>) => Promise<void> = async () => undefined;
  readonly order: string[] = [];
  children?: ContinuableChildren<ToolStartRequest<string>, string>;
  private readonly listeners = new Map<string, Set<Listener>>();

  list(): string[] {
    return [...this.providers.keys()];
  }

  getProvider(name: string): ToolProvider | undefined {
    return this.providers.get(name);
  }

  on(event: string, listener: Listener): () => void {
    const set = this.listeners.get(event) ?? new Set();
    this.listeners.set(event, set);
    set.add(listener);
    return () => set.delete(listener);
  }

  add(provider: ToolProvider): void {
    this.providers.set(provider.name, provider);
    for (const listener of this.listeners.get('subagent/provider-added') ?? []) (listener as (e: unknown) => void)({ provider });
  }

  remove(name: string): void {
    this.providers.delete(name);
    for (const listener of this.listeners.get('subagent/provider-removed') ?? []) (listener as (e: unknown) => void)({ name });
  }

  async start(name: string, request: ToolStartRequest<string>): Promise<SubagentRun<unknown>> {
    if (!this.providers.has(name)) throw new SubagentError('NO_PROVIDER', `no provider named '${name}'`);
    this.order.push(`start ${name}`);
    await this.startBehaviour(request);
    let resolve!: (result: SubagentResult) => void;
    let reject!: (error: unknown) => void;
    const result = new Promise<SubagentResult>((res, rej) => ((resolve = res), (reject = rej)));
    const run: FakeRun = {
      id: `run-${this.runs.length + 1}`,
      localAgent: undefined,
      request,
      result,
      resolve,
      reject,
      disposeCalls: 0,
      dispose: async () => {
        run.disposeCalls += 1;
        this.order.push(`dispose ${run.id}`);
        await this.disposeBehaviour();
      },
    };
    request.signal.addEventListener('abort', () => resolve({ output: [], stopReason: 'aborted' }), { once: true });
    this.runs.push(run);
    return run;
  }
}

export function provider(name: string, overrides: Partial<ToolProvider> = {}): ToolProvider {
  return {
    name,
    capabilities: { outputSchema: true, depthLimit: true, toolFilter: true, persona: true },
    inheritsParentContext: false,
    runtime: { sendMessage: true, resume: true },
    ...overrides,
  };
}

export const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];

interface FakeChild {
  readonly id: string;
  readonly parent: string;
  readonly label?: string;
  status: 'running' | 'idle';
  readonly inbox: string[];
  interrupted: InterruptLevel[];
}

/**
 * The contract's rules in memory: parents are agent ids (strings); a child started by `P` has
 * parent `P`, and a child may itself be a parent. Only the direct parent sends; the parent or an
 * ancestor interrupts; settled (removed) or absent targets of interrupt are no-ops.
 */
export class FakeChildren implements ContinuableChildren<ToolStartRequest<string>, string> {
  readonly children = new Map<string, FakeChild>();
  readonly starts: Array<{ provider: string; request: ToolStartRequest<string> }> = [];
  unreadable: string[] = [];
  private readonly listeners = new Set<(notice: ChildSettledNotice) => void>();
  private counter = 0;
  private messages = 0;

  async start(provider: string, request: ToolStartRequest<string>): Promise<{ childId: string; messageId: string }> {
    this.starts.push({ provider, request });
    this.counter += 1;
    const id = `child-${this.counter}`;
    const first = request.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
    this.children.set(id, { id, parent: request.parent, ...(request.label !== undefined && { label: request.label }), status: 'running', inbox: [first], interrupted: [] });
    return { childId: id, messageId: this.nextMessage() };
  }

  async sendMessage(childId: string, message: ContentBlock[], from: string): Promise<{ messageId: string }> {
    const child = this.children.get(childId);
    if (!child) throw new SubagentError('UNKNOWN_RUN', `no child ${childId}`);
    if (child.parent !== from) throw new SubagentError('NOT_OWNER', `${from} is not the parent of ${childId}`);
    child.inbox.push(message.map((b) => (b.type === 'text' ? b.text : '')).join(''));
    child.status = 'running';
    return { messageId: this.nextMessage() };
  }

  async interrupt(childId: string, by: string, level: InterruptLevel = 'now'): Promise<void> {
    const child = this.children.get(childId);
    if (!child) return;
    if (!this.ancestors(childId).includes(by)) throw new SubagentError('NOT_OWNER', `${by} is neither the parent nor an ancestor of ${childId}`);
    child.interrupted.push(level);
    child.status = 'idle';
  }

  async list(of: string, scope: 'children' | 'descendants' = 'children'): Promise<ChildListing> {
    const entries = [...this.children.values()]
      .filter((child) => (scope === 'children' ? child.parent === of : this.ancestors(child.id).includes(of)))
      .map((child) => ({
        id: child.id,
        status: child.status,
        ...(child.label !== undefined && { label: child.label }),
        hasChildren: [...this.children.values()].some((c) => c.parent === child.id),
        ...(scope === 'descendants' && { parentId: child.parent, depth: this.ancestors(child.id).indexOf(of) + 1 }),
      }));
    return { entries, diagnostics: [...this.unreadable] };
  }

  onSettled(listener: (notice: ChildSettledNotice) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  settle(notice: ChildSettledNotice): void {
    this.children.get(notice.childId)!.status = 'idle';
    for (const listener of this.listeners) listener(notice);
  }

  /** The parent chain of a child, nearest first. */
  private ancestors(childId: string): string[] {
    const chain: string[] = [];
    let current = this.children.get(childId);
    while (current) {
      chain.push(current.parent);
      current = this.children.get(current.parent);
    }
    return chain;
  }

  private nextMessage(): string {
    this.messages += 1;
    return `msg-${this.messages}`;
  }
}
