// The server's work-done progress ($/progress after window/workDoneProgress/create) as a VS Code
// notification with a Cancel button. vscode-languageclient's own ProgressFeature shows it in the status
// bar only, where it cannot be cancelled; this feature is registered after it, so its handler for the
// create request is the one installed. Cancel sends window/workDoneProgress/cancel: the server kills
// the job (fixpoint generate / quantize / flash-verify) and the command returns "cancelled".

import * as vscode from 'vscode';
import {
  BaseLanguageClient, ClientCapabilities, FeatureState, StaticFeature, WorkDoneProgress,
  WorkDoneProgressCancelNotification, WorkDoneProgressCreateParams, WorkDoneProgressCreateRequest,
} from 'vscode-languageclient';

export interface ProgressEvent {
  token: string;
  kind: 'begin' | 'report' | 'end' | 'cancel';
  title?: string;
  message?: string;
}

interface Active {
  token: string;
  title: string;
  progress?: vscode.Progress<{ message?: string; increment?: number }>;
  finish: () => void;
  subscription: vscode.Disposable;
}

export class NotificationProgress implements StaticFeature {
  private readonly active = new Map<string, Active>();
  private readonly emitter = new vscode.EventEmitter<ProgressEvent>();
  readonly onDidChange = this.emitter.event;

  constructor(private readonly client: BaseLanguageClient) {}

  getState(): FeatureState {
    return { kind: 'static' };
  }

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.window = capabilities.window ?? {};
    capabilities.window.workDoneProgress = true;
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, (params: WorkDoneProgressCreateParams) => {
      this.create(String(params.token));
    });
  }

  clear(): void {
    for (const entry of [...this.active.values()]) entry.finish();
    this.active.clear();
  }

  /** The titles of the server jobs now running. */
  titles(): string[] {
    return [...this.active.values()].map((a) => a.title);
  }

  /** Ask the server to cancel every running job; how many were asked. */
  cancelAll(): number {
    const tokens = [...this.active.keys()];
    for (const token of tokens) this.cancel(token);
    return tokens.length;
  }

  cancel(token: string): void {
    if (!this.active.has(token)) return;
    this.emitter.fire({ token, kind: 'cancel' });
    void this.client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
  }

  private create(token: string): void {
    let resolveDone: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    const entry: Active = {
      token,
      title: '',
      finish: () => {
        entry.subscription.dispose();
        this.active.delete(token);
        resolveDone();
      },
      subscription: new vscode.Disposable(() => undefined),
    };
    this.active.set(token, entry);
    entry.subscription = this.client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === 'begin') {
        entry.title = value.title;
        this.emitter.fire({ token, kind: 'begin', title: value.title, message: value.message });
        void vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: `Fixpoint: ${value.title}`, cancellable: value.cancellable === true },
          (progress, cancellation) => {
            entry.progress = progress;
            if (value.message) progress.report({ message: value.message });
            cancellation.onCancellationRequested(() => this.cancel(token));
            return done;
          },
        );
      } else if (value.kind === 'report') {
        this.emitter.fire({ token, kind: 'report', title: entry.title, message: value.message });
        entry.progress?.report({ message: value.message });
      } else {
        this.emitter.fire({ token, kind: 'end', title: entry.title, message: value.message });
        entry.finish();
      }
    });
  }
}
