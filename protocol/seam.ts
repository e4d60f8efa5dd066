/**
 * The subagent seam's vocabulary: the one home of its types, shared by the daemon (which hosts
 * providers) and the client (which implements `SubagentService` over the wire). Type-only.
 */

/** A piece of message content. Text is what every provider understands; images are passed through. */
export type ContentBlock =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'image'; readonly data: string; readonly mimeType: string };

/** Start-time features a provider supports; a request needing a missing one is rejected before start. */
export interface SubagentCapabilities {
  readonly outputSchema: boolean;
  readonly depthLimit: boolean;
  readonly toolFilter: boolean;
  readonly persona: boolean;
}

/**
 * Why a run ended. Extensible: a backend may add variants, and consumers treat any reason they
 * do not know as a failure (see `isKnownStopReason`).
 */
export type KnownStopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal';
export type SubagentStopReason = KnownStopReason | (string & {});

/** Token usage, summed over the steps of a run. */
export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cacheHitTokens: number;
  readonly cacheMissTokens: number;
  readonly reasoningTokens: number;
}

export interface SubagentResult {
  /** The child's last non-empty assistant message among its own events. */
  readonly output: ContentBlock[];
  /** Present only when a requested output schema was satisfied. */
  readonly structured?: unknown;
  /** Safe failure detail, at most 4 KiB of UTF-8. */
  readonly diagnostic?: string;
  readonly stopReason: SubagentStopReason;
  readonly usage?: Usage;
  /** Present when the child ran in its own git worktree (`isolation: 'worktree'`). */
  readonly worktree?: WorktreeOutcome;
}

/**
 * A start's worktree isolation (daemon providers): `isolation: 'worktree'` runs the child in its
 * own git worktree of the repository holding the parent's cwd, on its own branch.
 */
export interface WorktreeIsolationRequest {
  readonly isolation?: 'none' | 'worktree';
  /** The ref the worktree is made at (default HEAD). */
  readonly baseRef?: string;
  /** Carry the parent's uncommitted changes into the worktree (default false). */
  readonly includeUncommitted?: boolean;
  /** At dispose: `auto` (default) removes the worktree and keeps a branch with changes; `keep` keeps both; `always` drops both. */
  readonly cleanup?: 'auto' | 'keep' | 'always';
}

/** Where a child isolated in a git worktree worked, and what it changed there. */
export interface WorktreeOutcome {
  /** The worktree's directory (removed at dispose unless kept: see `cleanup`). */
  readonly path: string;
  /** The branch the child's changes are on: `subagentd/<label-slug>-<short run id>`. */
  readonly branch: string;
  /** The ref the worktree was made at, as asked (`HEAD` when none was). */
  readonly baseRef: string;
  readonly baseCommit: string;
  /** The branch's head after the run's changes were committed. */
  readonly headCommit: string;
  /** What the child changed against the worktree's start, as `git diff --numstat` counts it. */
  readonly changed: { readonly files: number; readonly insertions: number; readonly deletions: number };
  /** False when the changes were left uncommitted in the worktree (`worktrees.commit: false`). */
  readonly committed: boolean;
  /**
   * The parent's uncommitted changes at start: `left` (not in the worktree) or `carried`
   * (`includeUncommitted`); absent when the parent's tree was clean.
   */
  readonly parentUncommitted?: 'left' | 'carried';
}

/** Child tool scoping: exactly one of an allow list or a deny list of tool names. */
export type ToolFilter = { readonly allow: readonly string[] } | { readonly deny: readonly string[] };

/** Per-child agent options: the model and provider-defined extension fields. */
export interface AgentOptions {
  readonly model?: string;
  /** Runtime delegation depth of the agent these options belong to. */
  readonly subagentDepth?: number;
  readonly [extension: string]: unknown;
}

/** Object-rooted JSON Schema within the supported subset (see docs/protocol.md). */
export type ObjectJsonSchema = { readonly type: 'object' | readonly unknown[]; readonly [k: string]: unknown } | {
  readonly oneOf: readonly unknown[];
  readonly [k: string]: unknown;
};

/** Why a turn of a child ended, as recorded in its session log. */
export type TurnEndReason = 'completed' | 'max-tokens' | 'aborted' | 'blocked' | 'error' | 'max-steps' | 'interrupted';

export interface ToolCall {
  readonly id: string;
  readonly name: string;
  /** The raw JSON text of the arguments, exactly as the model produced it. */
  readonly arguments: string;
}

/** One entry of a child's append-only session log. Tool calls travel inside the assistant message. */
export type SessionEvent =
  | { readonly type: 'user/message'; readonly content: ContentBlock[]; readonly at?: string }
  | { readonly type: 'steering/message'; readonly content: ContentBlock[]; readonly at?: string }
  | {
      readonly type: 'assistant/message';
      readonly content: ContentBlock[];
      /** Model reasoning (DeepSeek `reasoning_content`), kept so later requests can send it back. */
      readonly reasoning?: string;
      readonly toolCalls?: ToolCall[];
      readonly at?: string;
    }
  | {
      readonly type: 'tool/result';
      readonly callId: string;
      readonly name: string;
      readonly content: ContentBlock[];
      readonly isError: boolean;
      readonly at?: string;
    }
  | { readonly type: 'usage'; readonly usage: Usage; readonly at?: string }
  | { readonly type: 'turn/end'; readonly reason: TurnEndReason; readonly diagnostic?: string; readonly at?: string };

export interface SessionHeader {
  readonly id: string;
  readonly parentSession?: string;
  readonly cwd: string;
  readonly delegationDepth: number;
  readonly provider: string;
  readonly model?: string;
  readonly createdAt: string;
}

/**
 * A live run: the consumer-owned handle for a ready child. `result` resolves on every child-level
 * outcome and rejects only on an infrastructure fault. `sendMessage` / `resume` are present
 * exactly when the provider supports them.
 */
export interface SubagentRun<Agent = unknown> {
  readonly id: string;
  readonly localAgent: Agent | undefined;
  readonly result: Promise<SubagentResult>;
  dispose(): Promise<void>;
  sendMessage?(content: ContentBlock[]): void;
  resume?(content: ContentBlock[]): Promise<SubagentRun<Agent>>;
}

/** The fields of a start request that mean the same on every side of the wire. */
export interface SubagentStartRequestBase {
  /** Optional short display label (the model-facing tool's `description`), kept with the run. */
  readonly label?: string;
  readonly prompt: ContentBlock[];
  /** The one cancellation channel, before readiness (start rejects) and after (the child stops). */
  readonly signal: AbortSignal;
  readonly agentOptions?: AgentOptions;
  readonly outputSchema?: ObjectJsonSchema;
  readonly maxDepth?: number;
  readonly toolFilter?: ToolFilter;
  readonly persona?: string;
}

/** A named child-agent transport. `Request` is the side's start request (client or daemon). */
export interface SubagentProvider<Request extends SubagentStartRequestBase = SubagentStartRequestBase, Agent = unknown> {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  /** Whether the child sees the parent's completed turns (fork: yes; spawn, acp: no). */
  readonly inheritsParentContext: boolean;
  start(request: Request): Promise<SubagentRun<Agent>>;
}

/** Lifecycle events, emitted only for runs whose start fulfilled; start always precedes end. */
export interface SubagentStartEvent {
  readonly runId: string;
  readonly provider: string;
  /** The child's id (its session id for a local child). */
  readonly id: string;
  /** Whether the provider exposed an in-process child. */
  readonly local: boolean;
}

export interface SubagentEndEvent extends SubagentStartEvent {
  readonly stopReason: SubagentStopReason;
  readonly lastAssistantMessage?: ContentBlock[];
  readonly usage?: Usage;
}

export const KNOWN_STOP_REASONS: readonly KnownStopReason[] = ['completed', 'aborted', 'error', 'max-tokens', 'refusal'];

/** The documented fall-through for the extensible union: anything unknown counts as failure. */
export function isKnownStopReason(reason: string): reason is KnownStopReason {
  return (KNOWN_STOP_REASONS as readonly string[]).includes(reason);
}

// ---------------------------------------------------------------------------------------------
// Continuable children (beyond one-shot runs). A service offers them by having a `children`
// member (capability by presence); the model-facing tool's `backgroundMode: 'continuable'`, its
// `send_message` / `interrupt_agent` / `list_agents` tools and the faces are written against this.
// `Parent` is the side's identity of the calling agent (the client's parent input, or the daemon's
// parent run); authority rules: only the child's direct parent sends messages, the parent or an
// ancestor may interrupt, anyone else gets NOT_OWNER.

export type ChildStatus = 'running' | 'idle';

export interface ChildEntry {
  /** The durable child id (what `send_message` / `interrupt_agent` take). */
  readonly id: string;
  readonly status: ChildStatus;
  readonly label?: string;
  readonly hasChildren: boolean;
  /** Present for the `descendants` scope. */
  readonly parentId?: string;
  readonly depth?: number;
}

export interface ChildListing {
  readonly entries: ChildEntry[];
  /** Entries that could not be read, reported rather than dropped. */
  readonly diagnostics: string[];
}

/** `after-step` finishes the current step then stops the turn; `now` stops at once. */
export type InterruptLevel = 'after-step' | 'now';

/** The one message a parent gets when a background child settles. */
export interface ChildSettledNotice {
  readonly childId: string;
  /** The parent the child belongs to (added compatibly: lets one listener serve several parents). */
  readonly parentId?: string;
  /** The message whose turn settled last (added compatibly: lets a sender wait for its own answer). */
  readonly messageId?: string;
  readonly label?: string;
  readonly stopReason: SubagentStopReason;
  /** "<label> finished|was stopped before it finished|ran out of room|declined|failed…", then its closing message or
   *  "It left no closing message." */
  readonly text: string;
}

/** What a continuable child tells its parent with its `report` tool, without ending its turn. */
export interface ChildReport {
  readonly childId: string;
  readonly parentId?: string;
  readonly label?: string;
  readonly output: string;
  /** `quiet`: for the parent's next turn; `next-step`: steer the parent's running turn. */
  readonly mode: 'quiet' | 'next-step';
}

export interface ContinuableChildren<Request extends SubagentStartRequestBase = SubagentStartRequestBase, Parent = unknown> {
  /** Resolves when the first message is accepted into the child's inbox; earlier failures roll back. */
  start(provider: string, request: Request): Promise<{ readonly childId: string; readonly messageId: string }>;
  /** Running child: queued FIFO as its next turn; idle: woken; not in memory: resumed from its record. */
  sendMessage(childId: string, message: ContentBlock[], from: Parent): Promise<{ readonly messageId: string }>;
  /** Settled or absent targets are no-ops; self, sibling, unrelated are refused (NOT_OWNER). */
  interrupt(childId: string, by: Parent, level?: InterruptLevel): Promise<void>;
  list(of: Parent, scope?: 'children' | 'descendants'): Promise<ChildListing>;
  /** Settlement notices for children of `parent`; a disconnected owner gets them on re-attach. */
  onSettled(listener: (notice: ChildSettledNotice) => void): { dispose(): void };
  /** Optional (added compatibly): reports children send with their `report` tool. */
  onReport?(listener: (report: ChildReport) => void): { dispose(): void };
}
