/**
 * `subagentd acp`: the ACP face on stdio (faces/acp), over the shared daemon. Its sessions are
 * kept under `<state dir>/acp-sessions`, so any face process of this user can load them.
 */
import { join } from 'node:path';
import { Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import type { PermissionHandler } from '../client/index.js';
import type { CommonSettings } from './options.js';
import { packageVersion } from '../common/package-info.js';
import { createAcpFace } from '../faces/acp/acp-face.js';
import { SessionStore } from '../faces/acp/session-store.js';
import { boundedLineStream, DEFAULT_FACE_LINE_BYTES, oversizeError } from '../faces/stdio-lines.js';
import { openFaceClient } from './face-client.js';
import type { FaceCommandOptions } from './mcp-command.js';
import { storedSession } from './ops-commands.js';
import { absoluteModel } from './run-command.js';

export async function acpCommand(settings: CommonSettings, options: FaceCommandOptions): Promise<number> {
  // The face answers permission prompts, but it needs the connection first: bind it late.
  let onPermission: PermissionHandler = () => ({ outcome: 'cancelled' });
  const service = await openFaceClient(settings, 'acp', (request, context) => onPermission(request, context));
  const model = absoluteModel(options.model);
  let face;
  try {
    face = createAcpFace({
      service,
      provider: options.providers[0] ?? 'spawn',
      store: new SessionStore(join(settings.stateDir, 'acp-sessions')),
      version: packageVersion(),
      readLog: async (runId) => (await storedSession(service.ops, runId))?.events,
      ...(model !== undefined && { model }),
      ...(options.isolation !== undefined && { isolation: options.isolation }),
    });
  } catch (error) {
    // An unknown provider: exit with its reason rather than fail every prompt later.
    await service.close();
    throw error;
  }
  onPermission = face.onPermission;
  try {
    // The cast only narrows the web typings.
    // stdin's lines are bounded before the SDK sees them (it would buffer any line whole).
    const maxLineBytes = settings.config.limits?.faceLineBytes ?? DEFAULT_FACE_LINE_BYTES;
    const input = boundedLineStream(process.stdin, maxLineBytes, (id, bytes) => {
      process.stdout.write(`${JSON.stringify(oversizeError(id, bytes, maxLineBytes))}\n`);
    });
    await face.serve(acp.ndJsonStream(Writable.toWeb(process.stdout) as WritableStream<Uint8Array>, input));
  } finally {
    await service.close();
    process.stdin.destroy();
  }
  return 0;
}
