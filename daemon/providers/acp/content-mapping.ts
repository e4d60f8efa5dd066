/** Seam content blocks as ACP prompt content. */
import type * as acp from '@agentclientprotocol/sdk';
import type { ContentBlock } from '../../../protocol/index.js';

export function toAcpContent(blocks: readonly ContentBlock[]): acp.ContentBlock[] {
  return blocks.map((block): acp.ContentBlock => {
    switch (block.type) {
      case 'text':
        return { type: 'text', text: block.text };
      case 'image':
        return { type: 'image', data: block.data, mimeType: block.mimeType };
      default: {
        const unknownBlock: never = block;
        throw new TypeError(`unsupported content block ${JSON.stringify(unknownBlock)}`);
      }
    }
  });
}

export function hasImage(blocks: readonly ContentBlock[]): boolean {
  return blocks.some((block) => block.type === 'image');
}
