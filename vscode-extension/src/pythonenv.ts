// Microsoft's Python extension (ms-python.python), when it is installed: the interpreter the user
// selected there, and an event when that choice changes. Optional - not an extensionDependency: without
// it (or with a release that lacks the published environments API) Fixpoint keeps its own order.
// The choosing itself is in interpreter.ts (unit-tested with a fake of the API).

import * as vscode from 'vscode';
import { environmentsApi, PYTHON_EXTENSION_ID, PythonEnvironmentsApi, selectedInterpreter, Selection } from './interpreter';

/** How long the server's start waits for the Python extension to activate (it can be slow at start-up). */
export const ACTIVATION_WAIT_MS = 10000;

export class PythonExtension implements vscode.Disposable {
  private loading: Promise<PythonEnvironmentsApi | undefined> | undefined;
  private loadNote = '';
  private readonly changed = new vscode.EventEmitter<void>();
  private readonly disposables: vscode.Disposable[] = [this.changed];
  private wasInstalled = this.installed();
  /** Fires when the selected interpreter may have changed (a new choice, the API arriving late, install). */
  readonly onDidChange = this.changed.event;

  constructor() {
    this.disposables.push(vscode.extensions.onDidChange(() => {
      const now = this.installed();
      if (now === this.wasInstalled) return;
      this.wasInstalled = now;
      this.loading = undefined;
      this.changed.fire();
    }));
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }

  installed(): boolean {
    return vscode.extensions.getExtension(PYTHON_EXTENSION_ID) !== undefined;
  }

  /**
   * The interpreter selected for `resource` (the first workspace folder), or a note saying why there is
   * none. Waits at most ACTIVATION_WAIT_MS for the extension (activation and answer): if the answer
   * comes later, onDidChange fires so that the server looks again.
   */
  async selection(resource: vscode.Uri | undefined, waitMs = ACTIVATION_WAIT_MS): Promise<Selection> {
    if (!this.installed()) return {};
    const answer = this.load().then((api) => (api ? selectedInterpreter(api, resource) : { note: this.loadNote }));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), waitMs)));
    const result = await Promise.race([answer, late]).finally(() => clearTimeout(timer));
    if (result !== 'late') return result;
    void answer.then(() => this.changed.fire());
    return { note: `the Python extension did not answer within ${waitMs / 1000} s: its interpreter is not used yet` };
  }

  private load(): Promise<PythonEnvironmentsApi | undefined> {
    if (!this.loading) {
      const extension = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
      // In the executor: an activate() that throws becomes the rejection handled below.
      this.loading = new Promise<unknown>((resolve) => resolve(extension?.isActive ? extension.exports : extension?.activate()))
        .then((exports: unknown) => {
          const api = environmentsApi(exports);
          if (!api) {
            this.loadNote = `the Python extension ${String(extension?.packageJSON?.version ?? '')} has no environments API: its interpreter is not used`;
            return undefined;
          }
          const subscription = api.onDidChangeActiveEnvironmentPath(() => this.changed.fire());
          this.disposables.push({ dispose: () => void subscription.dispose() });
          return api;
        }, (err: unknown) => {
          this.loadNote = `the Python extension failed to activate (${err instanceof Error ? err.message : String(err)}): its interpreter is not used`;
          return undefined;
        });
    }
    return this.loading;
  }
}
