/**
 * Loads a session file written by `SessionLog`. A torn last line (a crash mid-append leaves a
 * final line without its newline that does not parse) is tolerated and reported; any other bad
 * line is an error naming the file and the line, because silently skipping it would replay a
 * different conversation.
 */
import { validateSessionEvent, type SessionEvent, type SessionHeader } from '../../protocol/index.js';

export interface LoadedSession {
  readonly header: SessionHeader;
  readonly events: SessionEvent[];
  /** 1-based number of the torn last line that was dropped, when there was one. */
  readonly tornLine?: number;
}

export class SessionFileError extends Error {
  override readonly name = 'SessionFileError';
  constructor(
    readonly file: string,
    readonly line: number,
    problem: string,
  ) {
    super(`${file}:${line}: ${problem}`);
  }
}

export async function readSessionFile(file: string): Promise<LoadedSession> {
  // Imported here, not at load: the daemon loads this module at start (common/node-builtins.ts).
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(file, 'utf8');
  const lines = text.split('\n');
  const endsCleanly = lines.at(-1) === '';
  if (endsCleanly) lines.pop();
  if (lines.length === 0) throw new SessionFileError(file, 1, 'the file is empty: a session starts with its header');

  const header = parseHeader(file, lines[0] ?? '');
  const events: SessionEvent[] = [];
  let tornLine: number | undefined;
  for (let i = 1; i < lines.length; i += 1) {
    const lineNo = i + 1;
    const isTornCandidate = !endsCleanly && i === lines.length - 1;
    let value: unknown;
    try {
      value = JSON.parse(lines[i] ?? '');
    } catch (error) {
      if (isTornCandidate) {
        tornLine = lineNo;
        break;
      }
      throw new SessionFileError(file, lineNo, `not valid JSON (${(error as Error).message})`);
    }
    const failure = validateSessionEvent(value);
    if (failure) throw new SessionFileError(file, lineNo, `not a session event: ${failure.message}`);
    events.push(value as SessionEvent);
  }
  return tornLine === undefined ? { header, events } : { header, events, tornLine };
}

function parseHeader(file: string, line: string): SessionHeader {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    throw new SessionFileError(file, 1, `the header is not valid JSON (${(error as Error).message})`);
  }
  const header = value as Partial<Record<keyof SessionHeader, unknown>> | null;
  const ok =
    typeof header === 'object' &&
    header !== null &&
    typeof header.id === 'string' &&
    typeof header.cwd === 'string' &&
    typeof header.provider === 'string' &&
    typeof header.createdAt === 'string' &&
    Number.isSafeInteger(header.delegationDepth) &&
    (header.parentSession === undefined || typeof header.parentSession === 'string') &&
    (header.model === undefined || typeof header.model === 'string');
  if (!ok) throw new SessionFileError(file, 1, 'not a session header (needs id, cwd, provider, createdAt, delegationDepth)');
  return value as SessionHeader;
}
