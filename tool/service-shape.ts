/**
 * The smallest service the tool needs: the seam's registry view (list, getProvider, membership
 * events), `start`, and optionally `children` (continuable children, by presence). The client's
 * RemoteSubagentService satisfies it as is, and so can a service inside the daemon, which mounts
 * the same tool in its own children. `Parent` is the side's identity of the calling agent.
 */
import type { ContinuableChildren, SubagentCapabilities, SubagentRun, SubagentStartRequestBase, WorktreeIsolationRequest } from '../protocol/index.js';

/** What the tool reads of a provider: its start-time capabilities and context inheritance. */
export interface ToolProvider {
  readonly name: string;
  readonly capabilities: SubagentCapabilities;
  readonly inheritsParentContext: boolean;
  /** Runtime capabilities (daemon providers); a later turn of a continuable child needs `resume`. */
  readonly runtime?: { readonly sendMessage: boolean; readonly resume: boolean };
}

/** The start request the tool builds: the seam's base fields plus the calling agent. */
export type ToolStartRequest<Parent> = SubagentStartRequestBase & WorktreeIsolationRequest & { readonly parent: Parent };

export interface ToolService<Parent = unknown> {
  list(): readonly string[];
  getProvider(name: string): ToolProvider | undefined;
  on(event: 'subagent/provider-added', listener: (event: { readonly provider: { readonly name: string } }) => void): () => void;
  on(event: 'subagent/provider-removed', listener: (event: { readonly name: string }) => void): () => void;
  start(provider: string, request: ToolStartRequest<Parent>): Promise<SubagentRun<unknown>>;
  /** Present exactly when the service can continue children (send, interrupt, list, notices). */
  readonly children?: ContinuableChildren<ToolStartRequest<Parent>, Parent>;
}
