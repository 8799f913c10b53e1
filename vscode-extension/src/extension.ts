// Fixpoint for VS Code: a thin client of the Fixpoint language server (server/fixpoint_server in the
// Fixpoint repository). It starts the server from the right Python, shows its diagnostics and quick
// fixes, adds the palette commands, the report view and the status bar, and honours workspace trust.

import * as vscode from 'vscode';
import { Commands, PALETTE } from './commands';
import { ReportPanel } from './report/panel';
import { Report } from './report/render';
import { FixpointServer, RESTART_SETTINGS, ServerState } from './server';
import { StatusBar } from './status';

/** What activate() returns: for the integration tests (and other extensions). */
export interface FixpointApi {
  server: FixpointServer;
  report: ReportPanel;
  status: StatusBar;
  commands: Commands;
  /** Resolves when the server runs (rejects with the reason it cannot start). */
  ready(): Promise<void>;
  state(): ServerState;
  lastReport(): Report | Error | undefined;
}

let server: FixpointServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<FixpointApi> {
  const output = vscode.window.createOutputChannel('Fixpoint', { log: true });
  server = new FixpointServer(context, output);
  const report = new ReportPanel();
  const status = new StatusBar(server);
  const commands = new Commands(server, report, status);
  commands.register(context);
  context.subscriptions.push(output, server, report, status);

  const fixpoint = server;
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (RESTART_SETTINGS.some((s) => e.affectsConfiguration(s))) {
        output.appendLine('[client] settings changed: restarting the server');
        void fixpoint.restart();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      output.appendLine('[client] the workspace is trusted now: restarting the server with its settings and virtualenv');
      void fixpoint.restart();
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => void fixpoint.restart()),
    fixpoint.python.onDidChange(() => void fixpoint.pythonSelectionChanged()),
  );
  void vscode.commands.executeCommand('setContext', 'fixpoint.active', true);
  void fixpoint.start();
  return {
    server: fixpoint,
    report,
    status,
    commands,
    ready: async () => {
      await fixpoint.ready();
    },
    state: () => fixpoint.state,
    lastReport: () => report.report,
  };
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}

export { PALETTE };
