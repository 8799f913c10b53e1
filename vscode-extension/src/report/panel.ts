// The report webview: one panel, re-rendered from the last report. No scripts (enableScripts: false),
// no local resources, a CSP that allows only the page's own nonce'd style.

import * as crypto from 'crypto';
import * as vscode from 'vscode';
import { Report, renderReport } from './render';

export const VIEW_TYPE = 'fixpoint.report';

export class ReportPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  /** What the panel shows now (for the integration tests and the status bar). */
  html: string | undefined;
  report: Report | Error | undefined;

  get visible(): boolean {
    return this.panel?.visible ?? false;
  }

  get title(): string | undefined {
    return this.panel?.title;
  }

  show(report: Report | Error, subtitle?: string, preserveFocus = true): void {
    const title = report instanceof Error ? 'Fixpoint Report'
      : report.kind === 'verification' ? `Fixpoint: verify ${report.target ?? ''}`.trim() : 'Fixpoint: evaluation';
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(VIEW_TYPE, title, { viewColumn: vscode.ViewColumn.Beside, preserveFocus }, {
        enableScripts: false,
        enableCommandUris: false,
        enableFindWidget: true,
        localResourceRoots: [],
      });
      this.panel.onDidDispose(() => {
        this.panel = undefined;
        this.html = undefined;
      });
    }
    this.panel.title = title;
    const nonce = crypto.randomBytes(16).toString('base64');
    this.html = renderReport(report, { nonce, cspSource: this.panel.webview.cspSource, subtitle });
    this.report = report;
    this.panel.webview.html = this.html;
    this.panel.reveal(undefined, preserveFocus);
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
