/**
 * Token budgets over the model endpoints: `limits.lineageTokens` (a root run and all its
 * descendants together) and `limits.clientTokensPerDay` (per client name from `initialize`, per
 * UTC day). Usage is counted from the model steps' usage and kept in a small JSON file in the
 * state dir, rewritten (atomically) at each step that used tokens, so a restart forgets nothing.
 */
import { isoTime } from '../../common/iso-time.js';
import { existsSync, readFileSync, renameSync, writeFileSync } from '../../common/node-builtins.js';
import { SubagentError, type Usage } from '../../protocol/index.js';

export interface BudgetLimits {
  readonly lineageTokens?: number | undefined;
  readonly clientTokensPerDay?: number | undefined;
}

/** What a run's turn asks of the budgets: charge a step, and whether its lineage is spent. */
export interface RunBudget {
  /** Counts a step's tokens; returns the diagnostic when the lineage has now crossed its budget. */
  charge(usage: Usage): string | undefined;
  /** The diagnostic when the lineage's budget is already spent, else undefined. */
  spent(): string | undefined;
}

interface UsageFile {
  /** UTC day (YYYY-MM-DD) the client counts belong to. */
  day: string;
  clients: Record<string, number>;
  /** Lineage (root run id) → tokens and when it last used any (ms), for pruning. */
  lineages: Record<string, { tokens: number; at: number }>;
}

/** Lineages idle this long are forgotten (their runs are long settled). */
const LINEAGE_KEEP_MS = 7 * 86_400_000;

const utcDay = (at: number): string => isoTime(at).slice(0, 10);
const nextUtcMidnight = (at: number): Date => {
  const d = new Date(at);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1));
};

/** `name@version` (RunOwner.clientName) → `name`: the budget is the client's, whatever its version. */
export function clientKey(clientName: string | undefined): string {
  if (clientName === undefined) return 'unknown';
  const at = clientName.lastIndexOf('@');
  return at > 0 ? clientName.slice(0, at) : clientName;
}

export class TokenBudgets {
  private usage: UsageFile;

  constructor(
    private readonly file: string,
    private limits: BudgetLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.usage = this.read();
  }

  configure(limits: BudgetLimits): void {
    this.limits = limits;
  }

  /** Refuses a start whose client has spent its day's tokens (BUDGET_EXCEEDED, saying when it resets). */
  checkStart(clientName: string | undefined): void {
    const cap = this.limits.clientTokensPerDay;
    if (cap === undefined) return;
    this.rollDay();
    const client = clientKey(clientName);
    const used = this.usage.clients[client] ?? 0;
    if (used < cap) return;
    const resets = isoTime(nextUtcMidnight(this.now()).getTime());
    throw new SubagentError(
      'BUDGET_EXCEEDED',
      `client "${client}" has used ${used} tokens today, over limits.clientTokensPerDay=${cap}; its budget resets at ${resets}`,
    );
  }

  /** The budget of one run, charged to its lineage and its client. */
  forRun(lineage: string, clientName: string | undefined): RunBudget {
    const client = clientKey(clientName);
    const spent = (): string | undefined => {
      const cap = this.limits.lineageTokens;
      const used = this.usage.lineages[lineage]?.tokens ?? 0;
      return cap !== undefined && used >= cap
        ? `stopped: the lineage of run ${lineage} has used ${used} tokens, over its budget limits.lineageTokens=${cap}`
        : undefined;
    };
    return {
      spent,
      charge: (usage) => {
        const tokens = usage.promptTokens + usage.completionTokens;
        if (tokens > 0) this.add(lineage, client, tokens);
        return spent();
      },
    };
  }

  /** Today's tokens of a client (by name), for tests and status. */
  clientTokens(clientName: string): number {
    this.rollDay();
    return this.usage.clients[clientKey(clientName)] ?? 0;
  }

  private add(lineage: string, client: string, tokens: number): void {
    this.rollDay();
    const now = this.now();
    this.usage.clients[client] = (this.usage.clients[client] ?? 0) + tokens;
    const entry = this.usage.lineages[lineage];
    this.usage.lineages[lineage] = { tokens: (entry?.tokens ?? 0) + tokens, at: now };
    for (const [id, known] of Object.entries(this.usage.lineages)) if (now - known.at > LINEAGE_KEEP_MS) delete this.usage.lineages[id];
    this.write();
  }

  private rollDay(): void {
    const today = utcDay(this.now());
    if (this.usage.day !== today) this.usage = { ...this.usage, day: today, clients: {} };
  }

  private read(): UsageFile {
    const fresh: UsageFile = { day: utcDay(this.now()), clients: {}, lineages: {} };
    if (!existsSync(this.file)) return fresh;
    try {
      const parsed = JSON.parse(readFileSync(this.file, 'utf8')) as Partial<UsageFile>;
      return {
        day: typeof parsed.day === 'string' ? parsed.day : fresh.day,
        clients: typeof parsed.clients === 'object' && parsed.clients !== null ? parsed.clients : {},
        lineages: typeof parsed.lineages === 'object' && parsed.lineages !== null ? parsed.lineages : {},
      };
    } catch {
      return fresh; // an unreadable file counts as no usage rather than stopping the daemon
    }
  }

  private write(): void {
    const tmp = `${this.file}.tmp`;
    try {
      writeFileSync(tmp, JSON.stringify(this.usage), { mode: 0o600 });
      renameSync(tmp, this.file);
    } catch {
      // A full disk loses the latest counts, not the run: the state dir's faults are reported elsewhere.
    }
  }
}
