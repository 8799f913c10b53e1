// The command palette: Regenerate Model, Quantize Model..., Flash and Verify, Check Workspace, Show
// Report, Restart Server (and Select Interpreter..., Show Output). Each palette command asks what it
// needs, calls the server's workspace/executeCommand and shows the result; the server's own progress
// notification (with Cancel) runs meanwhile. Each also takes its options as an argument (no prompts):
// the integration tests and keybindings use that.

import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { parseProject, ProjectInfo, TargetChoice, targetChoices } from './project';
import { ReportPanel } from './report/panel';
import { parseReport, Report, summaryLine } from './report/render';
import { FixpointServer, UntrustedError } from './server';
import { StatusBar } from './status';
import { untrustedMessage } from './trust';

export const SERVER = {
  regenerate: 'fixpoint.regenerateModel',
  quantize: 'fixpoint.quantize',
  flashVerify: 'fixpoint.flashVerify',
  check: 'fixpoint.checkWorkspace',
  lastReport: 'fixpoint.lastReport',
} as const;

export const PALETTE = {
  regenerate: 'fixpoint.client.regenerateModel',
  quantize: 'fixpoint.client.quantize',
  flashVerify: 'fixpoint.client.flashVerify',
  check: 'fixpoint.client.checkWorkspace',
  showReport: 'fixpoint.client.showReport',
  restart: 'fixpoint.client.restartServer',
  selectInterpreter: 'fixpoint.client.selectInterpreter',
  showOutput: 'fixpoint.client.showOutput',
  showServerProblem: 'fixpoint.client.showServerProblem',
} as const;

type Json = Record<string, unknown>;

export const QUANT_METHODS: ReadonlyArray<{ label: string; detail: string }> = [
  { label: 'minmax', detail: 'the observed minimum and maximum of each tensor' },
  { label: 'percentile', detail: 'clips outliers at the 99.999th percentile' },
  { label: 'entropy', detail: 'KL-divergence calibration (TensorRT style)' },
  { label: 'mse', detail: 'the range with the least quantization error' },
];

export class Commands {
  constructor(
    private readonly server: FixpointServer,
    private readonly panel: ReportPanel,
    private readonly status: StatusBar,
  ) {}

  register(context: vscode.ExtensionContext): void {
    const reg = (id: string, fn: (...args: any[]) => unknown) => context.subscriptions.push(vscode.commands.registerCommand(id, fn));
    reg(PALETTE.regenerate, (o?: Json) => this.regenerate(o));
    reg(PALETTE.quantize, (o?: Json) => this.quantize(o));
    reg(PALETTE.flashVerify, (o?: string | Json) => this.flashVerify(o));
    reg(PALETTE.check, () => this.checkWorkspace());
    reg(PALETTE.showReport, () => this.showReport());
    reg(PALETTE.restart, () => this.restart());
    reg(PALETTE.selectInterpreter, () => this.selectInterpreter());
    reg(PALETTE.showOutput, () => this.server.output.show(true));
    reg(PALETTE.showServerProblem, () => this.server.showProblem());
    // Code actions' commands (the server's "Regenerate model") arrive here through the middleware.
    this.server.routeCodeActionCommand = (command, args) => {
      if (command === SERVER.regenerate) {
        return this.regenerate(Array.isArray(args) && args.length >= 2 && typeof args[1] === 'boolean' ? { force: args[1] } : (args[0] as Json | undefined));
      }
      return this.run(command, args, command);
    };
  }

  private root(): string | undefined {
    return vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file')?.uri.fsPath;
  }

  project(): ProjectInfo | undefined {
    const root = this.root();
    if (!root) return undefined;
    try {
      return parseProject(fs.readFileSync(path.join(root, 'fixpoint.toml'), 'utf8'));
    } catch {
      return undefined;
    }
  }

  /** Run a server command; failures are shown here (with the log a click away) and returned as they are. */
  private async run(command: string, args: unknown[], what: string): Promise<Json | undefined> {
    try {
      const result = (await this.server.execute<Json | null>(command, args)) ?? {};
      if (result.ok === false && typeof result.error === 'string' && !isVerifyReport(result)) {
        const cancelled = /: cancelled$/.test(result.error);
        const show = cancelled ? vscode.window.showInformationMessage : vscode.window.showErrorMessage;
        void show(`Fixpoint: ${what}: ${result.error}`, 'Show Log').then((c) => c && this.server.output.show(true));
      }
      return result;
    } catch (err) {
      if (err instanceof UntrustedError) {
        void vscode.window.showWarningMessage(err.message, 'Manage Workspace Trust')
          .then((c) => c && vscode.commands.executeCommand('workbench.trust.manage'));
      } else {
        void vscode.window.showErrorMessage(`Fixpoint: ${what}: ${err instanceof Error ? err.message : String(err)}`, 'Show Log')
          .then((c) => c && this.server.output.show(true));
      }
      return undefined;
    }
  }

  private refuseUntrusted(what: string): boolean {
    if (vscode.workspace.isTrusted) return false;
    void vscode.window.showWarningMessage(untrustedMessage(what), 'Manage Workspace Trust')
      .then((c) => c && vscode.commands.executeCommand('workbench.trust.manage'));
    return true;
  }

  // ------------------------------------------------------------------------------ regenerate

  async regenerate(options: Json = {}): Promise<Json | undefined> {
    if (this.refuseUntrusted('Regenerate Model')) return undefined;
    const result = await this.run(SERVER.regenerate, [options], 'Regenerate Model');
    if (!result) return undefined;
    if (result.ok === false && typeof result.error === 'string' && /--force|hand|changed since/i.test(result.error) && !options.force) {
      void vscode.window.showWarningMessage('Fixpoint: some generated files were edited by hand. Overwrite them (each is kept as <name>.bak)?', 'Overwrite')
        .then((c) => c && this.regenerate({ ...options, force: true }));
    } else if (result.ok !== false) {
      const files = Array.isArray(result.files) ? result.files.length : undefined;
      void vscode.window.showInformationMessage(`Fixpoint: regenerated the model sources${files !== undefined ? ` (${files} files)` : ''}.`);
    }
    return result;
  }

  // ------------------------------------------------------------------------------ quantize

  async quantize(given?: Json): Promise<Json | undefined> {
    if (this.refuseUntrusted('Quantize Model')) return undefined;
    const root = this.root();
    if (!root) {
      void vscode.window.showErrorMessage('Fixpoint: open the firmware folder first.');
      return undefined;
    }
    const options = given ?? (await this.askQuantizeOptions(root));
    if (!options) return undefined;
    const result = await this.run(SERVER.quantize, [options], 'Quantize Model');
    if (result && result.ok !== false) {
      const report = parseReport({ kind: 'evaluation', ...(result.report as Json) });
      if (!(report instanceof Error)) {
        this.showReportIfWanted(report, `quantized into ${String(result.params ?? options.output)}`);
        void vscode.window.showInformationMessage(`Fixpoint: wrote ${String(result.params ?? '')}. ${summaryLine(report)}`, 'Show Report')
          .then((c) => c && this.panel.show(report));
      }
    }
    return result;
  }

  private async askQuantizeOptions(root: string): Promise<Json | undefined> {
    const project = this.project();
    const rel = (u: vscode.Uri) => path.relative(root, u.fsPath);
    const exclude = '{**/node_modules/**,**/.venv/**,**/venv/**,**/.git/**,**/build/**}';
    const models = (await vscode.workspace.findFiles('**/*.onnx', exclude, 200)).map(rel).sort();
    const model = await pickPath('Quantize: the float model (ONNX)', models, project?.model, root, { filters: { 'ONNX model': ['onnx'] } });
    if (!model) return undefined;
    const data = (await vscode.workspace.findFiles('**/*.{npy,npz}', exclude, 200)).map(rel).sort();
    const calib = await pickPath('Quantize: the calibration data (.npy/.npz with x, or a folder of images)', data, undefined, root,
      { filters: { 'NumPy arrays': ['npy', 'npz'] }, folders: true });
    if (!calib) return undefined;
    const suggested = project?.params ?? model.replace(/\.onnx$/i, '') + '.params.json';
    const output = await vscode.window.showInputBox({
      title: 'Quantize: write the quant-params JSON to', value: suggested, prompt: 'relative to the workspace folder',
      validateInput: (v) => (v.trim() ? undefined : 'a file name is needed'),
    });
    if (!output) return undefined;
    const preferred = vscode.workspace.getConfiguration('fixpoint').get<string>('quantize.method', 'minmax');
    const items = QUANT_METHODS.map((m) => ({ ...m, description: m.label === preferred ? 'default' : undefined }));
    items.sort((a, b) => Number(b.label === preferred) - Number(a.label === preferred));
    const method = await vscode.window.showQuickPick(items, { title: 'Quantize: calibration method' });
    if (!method) return undefined;
    return { model, data: calib, output: output.trim(), method: method.label };
  }

  // ------------------------------------------------------------------------------ flash and verify

  async flashVerify(given?: string | Json): Promise<Json | undefined> {
    if (this.refuseUntrusted('Flash and Verify')) return undefined;
    const config = vscode.workspace.getConfiguration('fixpoint');
    const project = this.project();
    const choices = targetChoices(project, config.get<string>('target') || undefined);
    let target: TargetChoice | undefined;
    let options: Json;
    if (given !== undefined) {
      options = typeof given === 'string' ? { target: given } : { ...given };
      target = choices.find((c) => c.name === options.target);
    } else {
      target = await pickTarget(choices);
      if (!target) return undefined;
      options = { target: target.name };
    }
    if (target?.kind === 'board') {
      const serial = config.get<string>('serialPort')?.trim();
      const probe = config.get<string>('probe')?.trim();
      if (serial && options.serial === undefined) options.serial = serial;
      if (probe && options.probe === undefined) options.probe = probe;
    }
    const result = await this.run(SERVER.flashVerify, [options], `Flash and Verify (${String(options.target ?? 'default target')})`);
    if (result && isVerifyReport(result)) {
      const report = parseReport({ kind: 'verification', ...result });
      if (!(report instanceof Error)) {
        this.status.setVerify(report);
        this.showReportIfWanted(report, new Date().toLocaleString());
        this.server.output.appendLine(verdictTable(report));
        const line = `Fixpoint: ${summaryLine(report)}`;
        const show = report.kind === 'verification' && report.verdict === 'pass' ? vscode.window.showInformationMessage : vscode.window.showErrorMessage;
        void show(line, 'Show Report').then((c) => c && this.panel.show(report));
      }
    }
    return result;
  }

  // ------------------------------------------------------------------------------ check, report, restart

  async checkWorkspace(): Promise<Json | undefined> {
    const result = await this.run(SERVER.check, [{}], 'Check Workspace');
    if (result && result.ok !== false) {
      const byCode = Object.entries((result.by_code ?? {}) as Record<string, number>).map(([code, n]) => `${n} ${code}`).join(', ');
      const text = `Fixpoint: ${String(result.findings)} findings in ${String(result.files)} files` +
        `${byCode ? ` (${byCode})` : ''}; ${String(result.indexed)} files indexed.`;
      void vscode.window.showInformationMessage(text, 'Show Problems')
        .then((c) => c && vscode.commands.executeCommand('workbench.actions.view.problems'));
    }
    return result;
  }

  async showReport(): Promise<Report | Error | undefined> {
    const result = await this.run(SERVER.lastReport, [{}], 'Show Report');
    if (!result) return undefined;
    const report = parseReport(result);
    if (report instanceof Error) {
      void vscode.window.showInformationMessage(`Fixpoint: ${report.message}`);
      return report;
    }
    if (report.kind === 'verification') this.status.setVerify(report);
    this.panel.show(report, undefined, false);
    return report;
  }

  private showReportIfWanted(report: Report, subtitle: string): void {
    if (vscode.workspace.getConfiguration('fixpoint').get<boolean>('report.openAfterRun', true)) this.panel.show(report, subtitle);
  }

  async restart(): Promise<void> {
    await this.server.restart();
    if (this.server.state === 'running') void vscode.window.setStatusBarMessage('Fixpoint: language server restarted', 3000);
  }

  async selectInterpreter(): Promise<void> {
    const picked = await vscode.window.showOpenDialog({
      title: 'Fixpoint: the Python interpreter that has Fixpoint installed', canSelectMany: false, openLabel: 'Use this interpreter',
    });
    if (!picked?.[0]) return;
    const target = vscode.workspace.isTrusted && vscode.workspace.workspaceFolders?.length
      ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await vscode.workspace.getConfiguration('fixpoint').update('python', picked[0].fsPath, target); // restarts the server
  }
}

export function isVerifyReport(value: Json): boolean {
  return typeof value.verdict === 'string' && Array.isArray(value.layers);
}

/** The per-layer verdict as text (the output channel). */
export function verdictTable(report: Report): string {
  if (report.kind !== 'verification') return '';
  const rows = report.layers.map((l) => `  ${l.name.padEnd(20)} ${String(l.bytes ?? '-').padStart(7)} ${String(l.mismatched_bytes).padStart(10)}  ${l.mismatched_bytes ? 'DIFFERS' : 'ok'}`);
  return [`[client] ${summaryLine(report)}`, `  ${'layer'.padEnd(20)} ${'bytes'.padStart(7)} ${'mismatched'.padStart(10)}`, ...rows].join('\n');
}

async function pickTarget(choices: TargetChoice[]): Promise<TargetChoice | undefined> {
  type Item = vscode.QuickPickItem & { choice?: TargetChoice };
  const groups: Array<[string, TargetChoice['kind']]> = [['Boards and probes', 'board'], ['Emulators (QEMU)', 'emulator'], ['This machine', 'host']];
  const items: Item[] = [];
  const def = choices.find((c) => c.isDefault);
  if (def) items.push({ label: def.name, description: 'default', detail: def.description, choice: def });
  for (const [title, kind] of groups) {
    const of = choices.filter((c) => c.kind === kind && !c.isDefault);
    if (!of.length) continue;
    items.push({ label: title, kind: vscode.QuickPickItemKind.Separator });
    for (const c of of) items.push({ label: c.name, detail: c.description, choice: c });
  }
  const picked = await vscode.window.showQuickPick(items, { title: 'Fixpoint: Flash and Verify', placeHolder: 'the target to build, flash and verify on', matchOnDetail: true });
  return picked?.choice;
}

async function pickPath(title: string, found: string[], preferred: string | undefined, root: string,
  dialog: { filters?: Record<string, string[]>; folders?: boolean }): Promise<string | undefined> {
  const browse = 'Browse...';
  const list = preferred ? [preferred, ...found.filter((f) => f !== preferred)] : found;
  const items: vscode.QuickPickItem[] = [
    ...list.map((f) => ({ label: f, description: f === preferred ? "fixpoint.toml's" : undefined })),
    { label: browse, description: dialog.folders ? 'a file or a folder' : undefined, alwaysShow: true },
  ];
  const picked = await vscode.window.showQuickPick(items, { title });
  if (!picked) return undefined;
  if (picked.label !== browse) return picked.label;
  const uris = await vscode.window.showOpenDialog({
    title, defaultUri: vscode.Uri.file(root), canSelectFiles: true, canSelectFolders: dialog.folders ?? false, filters: dialog.folders ? undefined : dialog.filters,
  });
  return uris?.[0] ? path.relative(root, uris[0].fsPath) || '.' : undefined;
}
