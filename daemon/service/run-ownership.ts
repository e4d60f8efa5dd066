/**
 * Who a run belongs to, and how that is proven. A run belongs to one RunOwner at a time (a
 * client connection, or the in-daemon owner of continuable children). Its starter gets a run
 * token; the ledger keeps only the token's sha256, so any later connection, or a later daemon,
 * that presents the token may take the run over (run/attach).
 *
 * Rules:
 * - Run ids (144 bits) and tokens (192 bits) are unguessable; random bytes come from a pooled
 *   buffer (one kernel call per few hundred ids, not two per run).
 * - Tokens are compared in constant time, as hashes.
 * - A run whose owner went away belongs to DETACHED: nothing is delivered, client tools fail,
 *   permission prompts are cancelled.
 */
import { hash, randomBytes } from '../../common/node-builtins.js';
import { tokensEqual } from '../../common/daemon-token.js';
import type {
  EndParams,
  PermissionParams,
  PermissionResult,
  RunEventParams,
  SubagentStartEvent,
  ToolCallParams,
  ToolCallResult,
} from '../../protocol/index.js';

/** The connection a run belongs to, as the service sees it. */
export interface RunOwner {
  readonly id: string;
  readonly open: boolean;
  /** The name its client gave at `initialize` (`name@version`), for telemetry. */
  readonly clientName?: string;
  /** Its runs stay resumable in the ledger across a daemon shutdown (continuable children). */
  readonly durable?: boolean;
  /**
   * `answeredBy`: the caller's StartAnswer when its reply hands this run over; a connection whose
   * client takes that reply as the start notice (protocol 1.3) sends no notification then.
   */
  notifyStart(event: SubagentStartEvent, answeredBy?: StartAnswer): void;
  notifyEnd(event: EndParams): void;
  notifyRunEvent(event: RunEventParams): void;
  callTool(params: ToolCallParams, signal: AbortSignal): Promise<ToolCallResult>;
  askPermission(params: PermissionParams, signal: AbortSignal): Promise<PermissionResult>;
}

/**
 * How a caller of start or resume hands the run to its owner when that takes longer than the
 * call: a connection answers over its socket after the call returns. `whenSent` runs `then` once
 * the answer naming `runId` has its place in the connection's outgoing order (whatever the run
 * sends next goes out after it, possibly in the same write), or the connection is gone. Callers
 * that take the answer as the call's return value (inside the daemon) pass none.
 */
export interface StartAnswer {
  whenSent(runId: string, then: () => void): void;
}

/** An owner that is told nothing: its runs' client tools fail with `toolError`, prompts are cancelled. */
function silentOwner(id: string, open: boolean, toolError: string): RunOwner {
  return {
    id,
    open,
    notifyStart: () => undefined,
    notifyEnd: () => undefined,
    notifyRunEvent: () => undefined,
    callTool: () => Promise.reject(new Error(toolError)),
    askPermission: () => Promise.resolve({ outcome: 'cancelled' }),
  };
}

/** Stands in for a connection that went away: nothing is delivered, tools fail, prompts are cancelled. */
export const DETACHED: RunOwner = silentOwner('detached', false, 'the client that hosts this tool has disconnected');

/**
 * Owns the nested runs a cluster member starts for a parent it executes for another member's
 * client (daemon/cluster/lent-slots.ts): the parent's tool call waits on them here. Nothing is
 * delivered (the root's client sees them in `runs/list` on any member), client tools fail,
 * permission prompts are cancelled.
 */
export const EXECUTING_MEMBER: RunOwner = silentOwner('executing-member', true, "a nested run executing away from its root's client has no client tools");

let pool = Buffer.alloc(0);
function random(n: number): Buffer {
  if (pool.length < n) pool = randomBytes(4096);
  const out = pool.subarray(0, n);
  pool = pool.subarray(n);
  return out;
}

/**
 * Values minted ahead, a batch at a time, in the turn after a take ran the stock low: a start
 * then only takes one, and the random bytes and the token's hash are paid off its round trip.
 * An empty stock (a burst of starts) mints on the spot.
 */
class Minted<T> {
  private readonly stock: T[] = [];
  private refilling = false;

  constructor(private readonly mint: () => T) {}

  take(): T {
    const value = this.stock.pop() ?? this.mint();
    if (this.stock.length < MINT_LOW && !this.refilling) {
      this.refilling = true;
      setImmediate(() => {
        this.refilling = false;
        while (this.stock.length < MINT_BATCH) this.stock.push(this.mint());
      }).unref();
    }
    return value;
  }
}

const MINT_LOW = 8;
const MINT_BATCH = 64;
const runIds = new Minted(() => `run_${random(18).toString('base64url')}`);
const tokens = new Minted(() => {
  const token = random(24).toString('base64url');
  return { token, hash: hashToken(token) };
});

export const mintRunId = (): string => runIds.take();

/** A run token and the sha256 the ledger keeps of it. */
export interface MintedToken {
  readonly token: string;
  readonly hash: string;
}

/** A new run token and the sha256 the ledger keeps of it. */
export const mintToken = (): MintedToken => tokens.take();

/** One-shot `crypto.hash`: half the cost of a Hash object per start. */
export const hashToken = (token: string): string => hash('sha256', token, 'hex');

export function tokenMatches(token: string, hash: string): boolean {
  return tokensEqual(hashToken(token), hash);
}
