/**
 * The shape of every ACP answer the provider reads, checked before it is used. The SDK hands
 * answers through unvalidated, so an agent that answered `session/new` without a `sessionId`
 * used to get prompts for session `undefined` and a false `completed` run. A bad answer is a
 * `MalformedAnswer` naming the method and the field; the session turns it into START_FAILED
 * during the handshake and into an `error` result for a prompt.
 *
 * Read here: `initialize` (protocolVersion, agentCapabilities.promptCapabilities.image),
 * `session/new` (sessionId) and `session/prompt` (stopReason). The provider never sends
 * `session/load` (it cannot restore a session), so there is no answer of that kind to read.
 */

export class MalformedAnswer extends Error {
  override readonly name = 'MalformedAnswer';
}

type Json = Record<string, unknown>;

function object(value: unknown, where: string): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new MalformedAnswer(`${where} is not an object`);
  return value as Json;
}

function optionalObject(parent: Json, key: string, where: string): Json | undefined {
  const value = parent[key];
  return value === undefined || value === null ? undefined : object(value, `${where}.${key}`);
}

export interface InitializeAnswer {
  readonly protocolVersion: number;
  readonly images: boolean;
}

export function readInitializeAnswer(value: unknown): InitializeAnswer {
  const answer = object(value, 'the answer to initialize');
  const version = answer['protocolVersion'];
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 0) {
    throw new MalformedAnswer(`the answer to initialize has no valid protocolVersion (got ${JSON.stringify(version) ?? 'nothing'})`);
  }
  const capabilities = optionalObject(answer, 'agentCapabilities', 'initialize');
  const prompt = capabilities && optionalObject(capabilities, 'promptCapabilities', 'initialize.agentCapabilities');
  const image = prompt?.['image'];
  if (image !== undefined && image !== null && typeof image !== 'boolean') {
    throw new MalformedAnswer('initialize.agentCapabilities.promptCapabilities.image is not a boolean');
  }
  return { protocolVersion: version, images: image === true };
}

export function readNewSessionAnswer(value: unknown): string {
  const sessionId = object(value, 'the answer to session/new')['sessionId'];
  if (typeof sessionId !== 'string' || sessionId === '') {
    throw new MalformedAnswer(`the answer to session/new has no sessionId (got ${JSON.stringify(sessionId) ?? 'nothing'})`);
  }
  return sessionId;
}

export function readPromptAnswer(value: unknown): string {
  const stopReason = object(value, 'the answer to session/prompt')['stopReason'];
  if (typeof stopReason !== 'string' || stopReason === '') {
    throw new MalformedAnswer(`the answer to session/prompt has no stopReason (got ${JSON.stringify(stopReason) ?? 'nothing'})`);
  }
  return stopReason;
}
