/**
 * `initialize` from the client's side: present the client's name and the daemon's token, then
 * refuse a daemon of another major protocol version (PROTOCOL_VERSION, both versions in the
 * data; protocol/protocol-version.ts). The first connection and every re-dial go through here.
 */
import { InitializeRequest, PROTOCOL_VERSION, SubagentError, speaksOurMajor, type InitializeParams, type InitializeResult } from '../protocol/index.js';
import type { RpcChannel } from './rpc-channel.js';

export type ClientInfo = NonNullable<InitializeParams['clientInfo']>;

export async function handshake(channel: RpcChannel, clientInfo: ClientInfo, token: string | undefined, timeoutMs: number | undefined): Promise<InitializeResult> {
  const params: InitializeParams = { protocolVersion: PROTOCOL_VERSION, clientInfo, ...(token !== undefined && { token }) };
  const answer = await channel.request(InitializeRequest, params, { ...(timeoutMs !== undefined && { timeoutMs }) });
  if (!speaksOurMajor(answer.protocolVersion)) {
    throw new SubagentError(
      'PROTOCOL_VERSION',
      `${channel.describe()} speaks protocol ${answer.protocolVersion}, this client ${PROTOCOL_VERSION}; upgrade the older one`,
      { daemonVersion: answer.protocolVersion, clientVersion: PROTOCOL_VERSION },
    );
  }
  return answer;
}
