/** Configuration shared by the in-process providers (`spawn`, `fork`). */
import type { Logger } from 'pino';
import type { ModelResolver } from '../../agent/model/model-adapter.js';
import type { AgentTool, ToolPolicy } from '../../agent/tools/tool.js';
import type { NestedParent } from '../../service/delegation.js';

export interface InProcessProviderOptions {
  /** Where session logs live (`${sessionsDir}/${id}.jsonl`). */
  readonly sessionsDir: string;
  readonly resolveModel: ModelResolver;
  readonly policy: ToolPolicy;
  /** The system persona when a start brings none; `{{var}}` template (default: DEFAULT_PERSONA). */
  readonly defaultPersona?: string;
  /** Extra persona variables; the built-ins `cwd`, `date`, `provider`, `depth` take precedence. */
  readonly personaVars?: Record<string, string>;
  /** Model steps per turn before the turn ends with `max-steps` (default 50). */
  readonly maxSteps?: number;
  /** Nested delegation: the tools a new child of `provider` gets, as `parent` (none by default). */
  readonly delegationTools?: (provider: string, parent: NestedParent) => AgentTool[];
  readonly log: Logger;
}
