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
  /** The server's start stopped waiting for the extension: when it arrives, onDidChange fires. */
  private gaveUp = false;
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
   * none. Waits at most ACTIVATION_WAIT_MS for the extension: if it comes later, onDidChange fires.
   */
  async selection(resource: vscode.Uri | undefined, waitMs = ACTIVATION_WAIT_MS): Promise<Selection> {
    if (!this.installed()) return {};
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), waitMs)));
    const api = await Promise.race([this.load(), late]).finally(() => clearTimeout(timer));
    if (api === 'late') {
      this.gaveUp = true;
      return { note: `the Python extension did not activate within ${waitMs / 1000} s: its interpreter is not used yet` };
    }
    if (!api) return { note: this.loadNote };
    return selectedInterpreter(api, resource);
  }

  private load(): Promise<PythonEnvironmentsApi | undefined> {
    if (!this.loading) {
      const extension = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
      this.loading = Promise.resolve(extension?.isActive ? extension.exports : extension?.activate())
        .then((exports: unknown) => {
          const api = environmentsApi(exports);
          if (!api) {
            this.loadNote = `the Python extension ${String(extension?.packageJSON?.version ?? '')} has no environments API: its interpreter is not used`;
            return undefined;
          }
          const subscription = api.onDidChangeActiveEnvironmentPath(() => this.changed.fire());
          this.disposables.push({ dispose: () => void subscription.dispose() });
          if (this.gaveUp) {
            this.gaveUp = false;
            this.changed.fire();
          }
          return api;
        }, (err: unknown) => {
          this.loadNote = `the Python extension failed to activate (${err instanceof Error ? err.message : String(err)}): its interpreter is not used`;
          return undefined;
        });
    }
    return this.loading;
  }
}
