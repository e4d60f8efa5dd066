/**
 * The scriptable chat-completions server shared by the tests of one file, with per-test
 * bookkeeping: which requests belong to the current test, and a queue that a failed test cannot
 * leave dirty (unconsumed responses are burnt before the next test starts).
 */
import {
  startChatCompletionsServer,
  type ChatCompletionsServer,
  type RecordedRequest,
  type Responder,
  type ScriptedResponse,
} from './chat-completions-server.js';
import { waitFor } from './daemon-process.js';

export interface WireMessage {
  readonly role: string;
  readonly content?: unknown;
  readonly tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  readonly tool_call_id?: string;
}

export class ModelServer {
  private enqueued = 0;
  private firstOfTest = 0;

  private constructor(private readonly server: ChatCompletionsServer) {}

  static async start(): Promise<ModelServer> {
    return new ModelServer(await startChatCompletionsServer());
  }

  get baseUrl(): string {
    return this.server.baseUrl;
  }

  /** Requests received since the current test began (`beginTest`). */
  get requests(): RecordedRequest[] {
    return this.server.requests.slice(this.firstOfTest);
  }

  enqueue(...responses: Array<ScriptedResponse | Responder>): void {
    this.enqueued += responses.length;
    this.server.enqueue(...responses);
  }

  /** Messages of the n-th request of this test. */
  messages(n: number): WireMessage[] {
    const request = this.requests[n];
    if (!request) throw new Error(`the server received only ${this.requests.length} request(s) in this test`);
    return request.body.messages as WireMessage[];
  }

  async waitForRequests(count: number, timeoutMs = 5000): Promise<void> {
    await waitFor(() => this.requests.length >= count, timeoutMs, () => `${count} model request(s); got ${this.requests.length}`);
  }

  /**
   * Burn responses a failed test left in the queue (each POST consumes one; the body is dropped
   * at once, which also stops a streaming writer), then mark where the next test's requests begin.
   */
  async beginTest(): Promise<void> {
    const consumed = (): number => this.server.requests.filter((r) => r.method === 'POST' && r.path === '/v1/chat/completions').length;
    let leftovers = this.enqueued - consumed();
    while (leftovers-- > 0) {
      const response = await fetch(`${this.baseUrl}/chat/completions`, { method: 'POST', body: '{}' });
      await response.body?.cancel();
    }
    this.enqueued = consumed();
    this.firstOfTest = this.server.requests.length;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}

/** The text of a chat message's content (a string, or text parts). */
export function contentText(message: WireMessage | undefined): string {
  const content = message?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part: { text?: string }) => part.text ?? '').join('');
  return '';
}
