// Two status bar items: the server's state (click: its log, or the fix when it cannot start) and the
// last flash-and-verify verdict (click: the report).

import * as vscode from 'vscode';
import { Report, summaryLine } from './report/render';
import { FixpointServer, ServerState } from './server';

export class StatusBar implements vscode.Disposable {
  private readonly server: vscode.StatusBarItem;
  private readonly verify: vscode.StatusBarItem;
  /** The texts shown now (the integration test reads them). */
  serverText = '';
  verifyText = '';

  constructor(private readonly fixpoint: FixpointServer) {
    this.server = vscode.window.createStatusBarItem('fixpoint.server', vscode.StatusBarAlignment.Left, 10);
    this.server.name = 'Fixpoint language server';
    this.verify = vscode.window.createStatusBarItem('fixpoint.verify', vscode.StatusBarAlignment.Left, 9);
    this.verify.name = 'Fixpoint: last flash and verify';
    this.verify.command = 'fixpoint.client.showReport';
    fixpoint.onDidChangeState((s) => this.update(s));
    vscode.workspace.onDidGrantWorkspaceTrust(() => this.update(fixpoint.state));
    this.update(fixpoint.state);
  }

  update(state: ServerState): void {
    const restricted = vscode.workspace.isTrusted ? '' : ' (Restricted Mode: diagnostics only)';
    const icon = { stopped: '$(circle-slash)', starting: '$(sync~spin)', running: vscode.workspace.isTrusted ? '$(circuit-board)' : '$(shield)', failed: '$(error)', 'no-python': '$(error)' }[state];
    this.server.text = this.serverText = `${icon} Fixpoint`;
    const interp = this.fixpoint.interpreter ? `\n\n${this.fixpoint.interpreter.command} (${this.fixpoint.interpreter.origin})` : '';
    const words: Record<ServerState, string> = {
      stopped: 'stopped', starting: 'starting...', running: `running${restricted}`,
      failed: 'stopped unexpectedly - click to restart', 'no-python': 'cannot start - click for the fix',
    };
    const tooltip = new vscode.MarkdownString(`**Fixpoint language server**: ${words[state]}${interp}${this.fixpoint.version ? `\n\n${this.fixpoint.version}` : ''}`);
    tooltip.supportThemeIcons = true;
    this.server.tooltip = tooltip;
    this.server.command = state === 'no-python' ? 'fixpoint.client.showServerProblem'
      : state === 'failed' ? 'fixpoint.client.restartServer' : 'fixpoint.client.showOutput';
    this.server.backgroundColor = state === 'failed' || state === 'no-python' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    this.server.show();
  }

  setVerify(report: Report): void {
    if (report.kind !== 'verification') return;
    const pass = report.verdict === 'pass';
    this.verify.text = this.verifyText = `${pass ? '$(pass)' : '$(error)'} ${report.target ?? ''} ${(report.verdict ?? '?').toUpperCase()}`;
    this.verify.tooltip = `${summaryLine(report)}\nClick for the report.`;
    this.verify.backgroundColor = pass ? undefined : new vscode.ThemeColor('statusBarItem.errorBackground');
    this.verify.show();
  }

  dispose(): void {
    this.server.dispose();
    this.verify.dispose();
  }
}
