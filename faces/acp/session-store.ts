/**
 * The ACP face's durable sessions: one 0600 JSON file per session in a 0700 directory, holding
 * what `session/load` needs after the editor or the daemon restarted: the child's latest run id
 * and its token (the proof of ownership), the working directory and the provider. One file per
 * session, written by rename, so several editor windows (several face processes) never race on
 * a shared file. Ids are checked before they become paths.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface StoredSession {
  readonly sessionId: string;
  readonly cwd: string;
  readonly provider: string;
  /** The child's latest run: set once the first prompt started it. */
  readonly runId?: string;
  readonly runToken?: string;
}

const SESSION_ID = /^acp_[0-9a-f-]{36}$/;

export class SessionStore {
  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  static newId(): string {
    return `acp_${randomUUID()}`;
  }

  /** The stored session, or undefined for an id this store never wrote (or a malformed one). */
  read(sessionId: string): StoredSession | undefined {
    if (!SESSION_ID.test(sessionId)) return undefined;
    try {
      return JSON.parse(readFileSync(this.path(sessionId), 'utf8')) as StoredSession;
    } catch {
      return undefined;
    }
  }

  write(session: StoredSession): void {
    const path = this.path(session.sessionId);
    writeFileSync(`${path}.tmp`, JSON.stringify(session), { mode: 0o600 });
    renameSync(`${path}.tmp`, path);
  }

  private path(sessionId: string): string {
    if (!SESSION_ID.test(sessionId)) throw new Error(`not a session id of this face: ${sessionId}`);
    return join(this.dir, `${sessionId}.json`);
  }
}
