/**
 * Tools the client declared in its start request. Each one runs in the client through
 * `host.callTool`; the registry has already validated the arguments against the declared
 * `inputSchema`, so a malformed call never leaves the daemon.
 */
import type { ClientToolDeclaration } from '../../../protocol/index.js';
import type { RunHost } from '../../provider.js';
import type { AgentTool } from './tool.js';

export function clientTools(declarations: readonly ClientToolDeclaration[], host: RunHost): AgentTool[] {
  return declarations.map((declaration) => ({
    name: declaration.name,
    description: declaration.description,
    parameters: declaration.inputSchema,
    async execute(args, ctx) {
      const reply = await host.callTool({ callId: ctx.callId, name: declaration.name, arguments: args }, ctx.signal);
      return { content: reply.content, isError: reply.isError ?? false };
    },
  }));
}
