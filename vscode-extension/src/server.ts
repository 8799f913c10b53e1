// The language server's life cycle: find the interpreter, check that it has the server package, start
// `<python> -m fixpoint_server` over stdio (vscode-languageclient adds --stdio), restart it when its
// settings or the Python extension's selected interpreter change, and send it commands - gated by
// workspace trust.

import * as fs from 'fs';
import * as os from 'os';
import * as readline from 'readline';
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest, LanguageClient, LanguageClientOptions, MessageType, RevealOutputChannelOn, ServerOptions,
  ShowMessageNotification, State, TransportKind,
} from 'vscode-languageclient/node';
import {
  chooseInterpreter, Interpreter, noServerMessage, passedOverNote, probe, problemActions, resolveInterpreter,
} from './interpreter';
import { NotificationProgress } from './progress';
import { PythonExtension } from './pythonenv';
import { ServerLogParser } from './serverlog';
import { applySeverity, severityOverrides } from './severity';
import { commandAllowed, untrustedMessage } from './trust';

export type ServerState = 'stopped' | 'starting' | 'running' | 'failed' | 'no-python';

/** Settings whose change restarts the server (the others are read when used). */
export const RESTART_SETTINGS = ['fixpoint.python', 'fixpoint.cmsisNnPath', 'fixpoint.severity'];

/** The documents the client syncs to the server (it reads the others from disk and watches them). */
export const DOCUMENT_SELECTOR = [
  { scheme: 'file', language: 'c' },
  { scheme: 'file', language: 'cpp' },
  { scheme: 'file', language: 'makefile' },
  { scheme: 'file', pattern: '**/*.params.json' },
  { scheme: 'file', pattern: '**/*_params.json' },
  { scheme: 'file', pattern: '**/fixpoint.toml' },
  { scheme: 'file', pattern: '**/CMakeLists.txt' },
  { scheme: 'file', pattern: '**/*.cmake' },
  { scheme: 'file', pattern: '**/*.mk' },
  { scheme: 'file', pattern: '**/platformio.ini' },
  { scheme: 'file', pattern: '**/compile_commands.json' },
];

export interface CommandRouter {
  /** A server command started from a code action (e.g. "Regenerate model"). */
  (command: string, args: unknown[]): Promise<unknown>;
}

export class FixpointServer implements vscode.Disposable {
  client: LanguageClient | undefined;
  progress: NotificationProgress | undefined;
  state: ServerState = 'stopped';
  interpreter: Interpreter | undefined;
  /** "3.11.2 / fixpoint_server 0.1.0" once the interpreter was checked. */
  version = '';
  problem = '';
  private starting: Promise<void> | undefined;
  private readonly quiet: string[] = [];
  private readonly stateEmitter = new vscode.EventEmitter<ServerState>();
  readonly onDidChangeState = this.stateEmitter.event;
  routeCodeActionCommand: CommandRouter | undefined;
  /** Microsoft's Python extension, when installed: its selected interpreter is a candidate. */
  readonly python = new PythonExtension();
  /** The Python extension's selection the last start saw (to restart only when it changes). */
  private selectedSeen: string | undefined;

  constructor(private readonly context: vscode.ExtensionContext, readonly output: vscode.LogOutputChannel) {}

  dispose(): void {
    void this.stop();
    this.python.dispose();
    this.stateEmitter.dispose();
  }

  /** The interpreter selected in the Python extension changed: restart if the server would use it. */
  async pythonSelectionChanged(): Promise<void> {
    if (this.interpreter?.source === 'setting') return; // fixpoint.python overrides the Python extension
    const { executable } = await this.python.selection(this.folderUris()[0]);
    if (executable === this.selectedSeen) return;
    this.selectedSeen = executable; // one restart for a burst of events
    this.output.appendLine(`[client] the Python extension's interpreter is now ${executable ?? '(none)'}: restarting the server`);
    await this.restart();
  }

  private setState(state: ServerState): void {
    this.state = state;
    this.stateEmitter.fire(state);
  }

  /** Start once; concurrent callers share the start. */
  start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.progress = undefined;
    if (client) {
      try {
        await client.dispose(5000); // stop (shutdown + exit, then kill) and free the client
      } catch (err) {
        this.output.appendLine(`[client] stopping the server: ${String(err)}`);
      }
    }
    if (this.state !== 'no-python') this.setState('stopped');
  }

  /** Resolves when the server runs (starting it if needed); rejects with the problem if it cannot. */
  async ready(): Promise<LanguageClient> {
    if (this.state !== 'running' || !this.client) await this.start();
    if (!this.client || this.state !== 'running') throw new Error(this.problem || 'the Fixpoint language server is not running');
    return this.client;
  }

  private folderUris(): vscode.Uri[] {
    return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri);
  }

  private folders(): string[] {
    return this.folderUris().map((uri) => uri.fsPath);
  }

  /** A folder outside the workspace for the interpreter check and, untrusted, the server's cwd. */
  private safeCwd(): string {
    const dir = this.context.globalStorageUri.fsPath;
    try {
      fs.mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      return os.tmpdir();
    }
  }

  private async doStart(): Promise<void> {
    const trusted = vscode.workspace.isTrusted;
    const config = vscode.workspace.getConfiguration('fixpoint');
    const folders = this.folders();
    // Untrusted: the workspace's own value of fixpoint.python is ignored (restrictedConfigurations does
    // the same in VS Code; this covers older hosts).
    const configured = trusted ? config.get<string>('python') : config.inspect<string>('python')?.globalValue;
    this.setState('starting');
    const inputs = { configured, folders, trusted, home: os.homedir(), exists: (f: string) => fs.existsSync(f), realpath: realpathOrSelf };
    // The Python extension is asked (and activated) only when fixpoint.python does not decide.
    const settingDecides = resolveInterpreter(inputs).interpreter.source === 'setting';
    const selection = settingDecides ? {} : await this.python.selection(this.folderUris()[0]);
    this.selectedSeen = selection.executable;
    const { candidates, notes } = resolveInterpreter({ ...inputs, selected: selection.executable });
    if (selection.note) notes.unshift(selection.note);
    this.interpreter = candidates[0];
    for (const note of notes) this.output.appendLine(`[client] ${note}`);
    const env: NodeJS.ProcessEnv = { ...process.env, PYTHONUNBUFFERED: '1' };
    const cmsisNn = config.get<string>('cmsisNnPath')?.trim();
    if (cmsisNn && trusted) env.FIXPOINT_CMSIS_NN = cmsisNn;
    if (!trusted) env.PYTHONSAFEPATH = '1'; // no cwd or script folder on sys.path (Python >= 3.11)
    const cwd = this.safeCwd();
    const chosen = await chooseInterpreter(candidates, (i) => probe(i.command, { cwd, env }));
    for (const failure of chosen.ok ? chosen.passedOver : []) this.output.appendLine(`[client] ${passedOverNote(failure)}`);
    if (!chosen.ok) {
      this.problem = noServerMessage(chosen.failures);
      this.version = '';
      this.output.appendLine(`[client] ${this.problem}`);
      this.setState('no-python');
      void this.showProblem();
      return;
    }
    const { interpreter, result: probed } = chosen;
    this.interpreter = interpreter;
    this.output.appendLine(`[client] interpreter: ${interpreter.command} (${interpreter.origin})${trusted ? '' : ' - Restricted Mode: diagnostics only'}`);
    this.problem = '';
    this.version = `Python ${probed.python}, fixpoint_server ${probed.version}`;
    this.output.appendLine(`[client] ${probed.executable}: ${this.version}`);
    const overrides = severityOverrides(config.get('severity'));
    const serverOptions: ServerOptions = {
      command: interpreter.command,
      args: ['-m', 'fixpoint_server'],
      transport: TransportKind.stdio,
      options: { cwd: trusted && folders[0] ? folders[0] : this.safeCwd(), env },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      stdioOptions: {
        stdout: (input, channel) => readline.createInterface({ input, crlfDelay: Infinity, terminal: false }).on('line', (l) => channel.info(l)),
        stderr: (input, channel) => {
          const parser = new ServerLogParser();
          readline.createInterface({ input, crlfDelay: Infinity, terminal: false }).on('line', (l) => {
            const { level, text } = parser.line(l);
            channel[level](text);
          });
        },
      },
      diagnosticCollectionName: 'fixpoint',
      initializationOptions: { severity: overrides, trusted },
      middleware: {
        handleDiagnostics: (uri, diagnostics, next) => {
          const shown: vscode.Diagnostic[] = [];
          for (const d of diagnostics) {
            const code = typeof d.code === 'object' && d.code !== null ? String(d.code.value) : d.code === undefined ? undefined : String(d.code);
            const severity = applySeverity(code, d.severity, overrides);
            if (severity === null) continue;
            d.severity = severity as vscode.DiagnosticSeverity;
            shown.push(d);
          }
          next(uri, shown);
        },
        // Commands the server attaches to code actions ("Regenerate model") go through the same path
        // as the palette's: trust check, progress, result message.
        executeCommand: (command, args, next) => {
          if (!commandAllowed(command, vscode.workspace.isTrusted)) {
            void vscode.window.showWarningMessage(untrustedMessage(`"${command}"`));
            return undefined;
          }
          return this.routeCodeActionCommand ? this.routeCodeActionCommand(command, args) : next(command, args);
        },
      },
    };
    const client = new LanguageClient('fixpoint', 'Fixpoint', serverOptions, clientOptions);
    const progress = new NotificationProgress(client);
    client.registerFeature(progress);
    // While the extension reports a command's failure itself, the server's copy of the message goes to
    // the log only (one notification per failure).
    client.onNotification(ShowMessageNotification.type, (m) => {
      if (this.quiet.some((prefix) => m.message.startsWith(prefix))) {
        this.output.appendLine(`[server] ${m.message}`);
        return;
      }
      const show = m.type === MessageType.Error ? vscode.window.showErrorMessage
        : m.type === MessageType.Warning ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
      void show(m.message);
    });
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Running) this.setState('running');
      else if (e.newState === State.Stopped && this.state === 'running') this.setState('failed');
    });
    this.client = client;
    this.progress = progress;
    try {
      await client.start();
      this.setState('running');
    } catch (err) {
      this.problem = `Fixpoint: the language server did not start: ${err instanceof Error ? err.message : String(err)}`;
      this.output.appendLine(`[client] ${this.problem}`);
      this.setState('failed');
      void vscode.window.showErrorMessage(this.problem, 'Show Log').then((c) => c && this.output.show());
    }
  }

  async showProblem(): Promise<void> {
    if (!this.problem) return;
    const actions = problemActions({ pythonExtension: this.python.installed(), settingUsed: this.interpreter?.source === 'setting' });
    const choice = await vscode.window.showErrorMessage(this.problem, ...actions.map((a) => a.label));
    const action = actions.find((a) => a.label === choice);
    if (action) await vscode.commands.executeCommand(action.command, ...action.args);
  }

  /**
   * workspace/executeCommand with the arguments as given. Build commands are refused in an untrusted
   * workspace. `quietPrefix`: the caller reports failures itself, so the server's message is logged only.
   */
  async execute<T = unknown>(command: string, args: unknown[], quiet = true): Promise<T> {
    if (!commandAllowed(command, vscode.workspace.isTrusted)) throw new UntrustedError(command);
    const client = await this.ready();
    const prefix = `${command}:`;
    if (quiet) this.quiet.push(prefix);
    try {
      return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args })) as T;
    } finally {
      if (quiet) this.quiet.splice(this.quiet.indexOf(prefix), 1);
    }
  }
}

export class UntrustedError extends Error {
  constructor(readonly command: string) {
    super(untrustedMessage(`"${command}"`));
  }
}

/** The file a path links to; the path itself when it does not exist (yet). */
function realpathOrSelf(file: string): string {
  try {
    return fs.realpathSync(file);
  } catch {
    return file;
  }
}
