/**
 * A minimal VS Code extension over the shared pool: the language client runs `subagentd connect`
 * (which starts the daemon when none runs and adds its token), and one command delegates a task.
 * Not published; the conversation itself lives in pool-client.ts, which the repository's tests drive.
 */
import * as vscode from 'vscode';
import { LanguageClient, TransportKind, type ServerOptions } from 'vscode-languageclient/node';
import { delegate, INITIALIZATION_OPTIONS } from './pool-client';

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration('subagentd');
  const serverOptions: ServerOptions = { command: config.get<string>('command', 'subagentd'), args: ['connect'], transport: TransportKind.stdio };
  client = new LanguageClient('subagentd', 'subagentd', serverOptions, {
    documentSelector: [],
    initializationOptions: INITIALIZATION_OPTIONS,
  });
  await client.start();
  context.subscriptions.push(
    vscode.commands.registerCommand('subagentd.delegate', async () => {
      const task = await vscode.window.showInputBox({ prompt: 'What should the subagent do?' });
      const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
      if (!task || !cwd || !client) return;
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'subagentd: working…' },
        () => delegate(client!, task, cwd, config.get<string>('model') || undefined),
      );
      const doc = await vscode.workspace.openTextDocument({ content: result.text, language: 'markdown' });
      await vscode.window.showTextDocument(doc);
      if (result.stopReason !== 'completed') void vscode.window.showWarningMessage(`subagentd: the child ended with "${result.stopReason}"`);
    }),
  );
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
