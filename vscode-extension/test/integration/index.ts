// The extension's integration tests, run by VS Code's extension host (extensionTestsPath) inside
// code-server, against the real Python language server and a firmware tree (test/fixture/
// make_workspace.py: the server tests' tree with a stale quant-params JSON and a uint8 zero point).
// VS Code calls run(); a rejected promise fails the run. Each step's outcome goes to $FIXPOINT_E2E_OUT.
//   FIXPOINT_E2E_FLASH=1   also flash and verify on qemu-m4 (needs CMSIS-NN, QEMU, the Arm toolchain)

import * as fs from 'fs';
import * as vscode from 'vscode';
import type { FixpointApi } from '../../src/extension';

import {
  assert, codeOf, fixpointDiagnostics, processesMentioning, restarted, sleep, Step, stepRunner, until,
} from './helpers';
import { pythonExtensionSteps, pythonExtensionUntrustedStep } from './pythonext';

export async function run(): Promise<void> {
  if (process.env.FIXPOINT_E2E_MODE === 'untrusted') return runUntrusted();
  const out = process.env.FIXPOINT_E2E_OUT;
  const flash = process.env.FIXPOINT_E2E_FLASH === '1';
  const steps: Step[] = [];
  const step = stepRunner(steps);
  const config = () => vscode.workspace.getConfiguration('fixpoint');
  try {
    const folder = vscode.workspace.workspaceFolders![0].uri;
    const modelC = vscode.Uri.joinPath(folder, 'src', 'model', 'model.c');
    const params = vscode.Uri.joinPath(folder, 'model', 'residual.params.json');
    let api!: FixpointApi;

    await step('the extension activates and starts the server', async () => {
      const ext = vscode.extensions.getExtension<FixpointApi>('fixpoint.fixpoint');
      assert(ext, 'extension fixpoint.fixpoint not found');
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(modelC));
      api = await ext.activate();
      await api.ready();
      assert(api.state() === 'running', `server state ${api.state()}`);
      assert(api.status.serverText.includes('Fixpoint'), `status bar: ${api.status.serverText}`);
      return { interpreter: api.server.interpreter, version: api.server.version, status: api.status.serverText };
    });

    await step('diagnostics arrive (stale-generated on the sources, wrong-zero-point in the JSON)', async () => {
      const stale = await until('stale-generated on model.c', () => fixpointDiagnostics(modelC, 'stale-generated').length > 0 && fixpointDiagnostics(modelC, 'stale-generated'));
      const zp = await until('wrong-zero-point in the params JSON', () => fixpointDiagnostics(params, 'wrong-zero-point').length > 0 && fixpointDiagnostics(params, 'wrong-zero-point'));
      assert(stale[0].severity === vscode.DiagnosticSeverity.Warning, `stale-generated severity ${stale[0].severity}`);
      assert(zp[0].severity === vscode.DiagnosticSeverity.Error, `wrong-zero-point severity ${zp[0].severity}`);
      // The code in the Problems panel links to the rule's explanation, a file shipped with the server.
      const link = typeof stale[0].code === 'object' ? stale[0].code.target : undefined;
      assert(link?.scheme === 'file' && link.path.endsWith('/rule_docs/stale-generated.md'), `stale-generated's link: ${link}`);
      const explanation = fs.readFileSync(link.fsPath, 'utf8');
      assert(explanation.startsWith('# stale-generated\n'), `${link.fsPath} starts ${JSON.stringify(explanation.slice(0, 40))}`);
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', modelC, stale[0].range);
      const titles = (actions ?? []).map((a) => a.title);
      assert(titles.includes('Regenerate model'), `code actions on model.c: ${JSON.stringify(titles)}`);
      return { stale: stale[0].message, zeroPoint: zp[0].message, actions: titles, link: link.toString() };
    });

    await step('a severity setting restarts the server and changes the shown severity', async () => {
      const states = await restarted(api, () => config().update('severity.stale-generated', 'error', vscode.ConfigurationTarget.Global));
      await until('stale-generated shown as an error', () => fixpointDiagnostics(modelC, 'stale-generated')[0]?.severity === vscode.DiagnosticSeverity.Error);
      await restarted(api, () => config().update('severity.stale-generated', undefined, vscode.ConfigurationTarget.Global));
      await until('stale-generated back to a warning', () => fixpointDiagnostics(modelC, 'stale-generated')[0]?.severity === vscode.DiagnosticSeverity.Warning);
      return states;
    });

    // fixpoint.python is machine-overridable: in a remote window (code-server) the user's value lives in
    // the Remote settings; a workspace value overrides it.
    await step('a missing interpreter: a clear error, then back', async () => {
      await restarted(api, () => config().update('python', '/nonexistent/bin/python3', vscode.ConfigurationTarget.Workspace), 'no-python');
      const problem = api.server.problem;
      assert(/was not found/.test(problem) && problem.includes('fixpoint.python'), `problem: ${problem}`);
      assert(api.status.serverText.includes('$(error)'), `status bar: ${api.status.serverText}`);
      await restarted(api, () => config().update('python', undefined, vscode.ConfigurationTarget.Workspace));
      await until('diagnostics again', () => fixpointDiagnostics(modelC, 'stale-generated').length > 0);
      return problem;
    });

    await step('a quick fix edits the document (wrong-zero-point: 128 -> the int8 zero point)', async () => {
      const doc = await vscode.workspace.openTextDocument(params);
      await vscode.window.showTextDocument(doc);
      const [diag] = await until('wrong-zero-point', () => fixpointDiagnostics(params, 'wrong-zero-point').length > 0 && fixpointDiagnostics(params, 'wrong-zero-point'));
      const before = doc.lineAt(diag.range.start.line).text;
      assert(before.includes('128'), `line ${diag.range.start.line}: ${before}`);
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', params, diag.range, vscode.CodeActionKind.QuickFix.value);
      const fix = (actions ?? []).find((a) => a.edit && /zero point/i.test(a.title));
      assert(fix?.edit, `no quick fix with an edit: ${JSON.stringify((actions ?? []).map((a) => ({ title: a.title, edit: !!a.edit, diagnostics: a.diagnostics?.map(codeOf) })))}`);
      assert(await vscode.workspace.applyEdit(fix.edit), 'applyEdit failed');
      const after = doc.lineAt(diag.range.start.line).text;
      assert(after !== before && !/:\s*128\b/.test(after), `after the fix: ${after}`);
      await until('wrong-zero-point gone', () => fixpointDiagnostics(params, 'wrong-zero-point').length === 0);
      assert(await doc.save(), 'saving the JSON failed');
      return { title: fix.title, before: before.trim(), after: after.trim() };
    });

    await step('"Regenerate Model" rewrites the generated sources', async () => {
      const before = fs.readFileSync(modelC.fsPath, 'utf8');
      const result = await vscode.commands.executeCommand<Record<string, unknown>>('fixpoint.client.regenerateModel');
      assert(result && result.ok !== false, `regenerate: ${JSON.stringify(result)}`);
      const after = fs.readFileSync(modelC.fsPath, 'utf8');
      assert(after !== before, 'model.c unchanged on disk');
      await until('stale-generated gone', () => fixpointDiagnostics(modelC, 'stale-generated').length === 0);
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === modelC.fsPath);
      if (doc) await until('the open model.c shows the new text', () => doc.getText() === after, 10_000);
      return { files: (result.files as unknown[] | undefined)?.length };
    });

    await step('"Check Workspace" reports counts', async () => {
      const result = await vscode.commands.executeCommand<Record<string, unknown>>('fixpoint.client.checkWorkspace');
      assert(result && result.ok === true && typeof result.findings === 'number' && (result.indexed as number) > 0, JSON.stringify(result));
      return result;
    });

    await step('"Quantize Model..." calibrates, evaluates and opens the evaluation report', async () => {
      const result = await vscode.commands.executeCommand<Record<string, unknown>>('fixpoint.client.quantize',
        { model: 'model/residual.onnx', data: 'model/calib.npz', output: 'model/requant.params.json', method: 'minmax' });
      const written = fs.existsSync(vscode.Uri.joinPath(folder, 'model', 'requant.params.json').fsPath);
      assert(result && result.ok === true, `quantize: ${JSON.stringify(result).slice(0, 600)}`);
      assert(written, 'no params JSON written');
      const report = result.report as { layers?: unknown[]; agreement?: number };
      assert(Array.isArray(report?.layers) && report.layers.length > 0, 'no per-layer evaluation');
      await until('the evaluation report view', () => api.report.visible && api.report.html?.includes('Evaluation: float vs int8'));
      return { params: result.params, layers: report.layers.length, agreement: report.agreement };
    });

    if (flash) {
      await step('"Flash and Verify" on qemu-m4 completes with a per-layer verdict and opens the report', async () => {
        const result = await vscode.commands.executeCommand<Record<string, unknown>>('fixpoint.client.flashVerify', 'qemu-m4');
        assert(result && result.verdict === 'pass', `flash-verify: ${JSON.stringify(result).slice(0, 800)}`);
        assert(Array.isArray(result.layers) && result.layers.length === 16, 'layers');
        await until('the report view', () => api.report.visible && api.report.html?.includes('conv1'));
        assert(api.report.html!.includes('badge pass'), 'verdict badge in the report');
        assert(/<svg class="chart"/.test(api.report.html!), 'chart in the report');
        assert(api.status.verifyText.includes('qemu-m4 PASS'), `status bar: ${api.status.verifyText}`);
        return { verdict: result.verdict, layers: result.layers.length, title: api.report.title, status: api.status.verifyText };
      });

      await step('"Show Report" renders the server\'s last report', async () => {
        const report = await vscode.commands.executeCommand<{ kind?: string }>('fixpoint.client.showReport');
        assert(report && report.kind === 'verification', JSON.stringify(report));
        assert(api.report.visible, 'report panel not visible');
        return api.report.title;
      });

      await step('cancelling "Flash and Verify" stops the job (progress Cancel -> the server kills the CLI)', async () => {
        await until('the last run\'s QEMU to exit', () => processesMentioning(folder.fsPath, 'qemu-system').length === 0, 20_000);
        const began = new Promise<void>((resolve) => {
          const sub = api.server.progress!.onDidChange((e) => {
            if (e.kind === 'begin') {
              sub.dispose();
              resolve();
            }
          });
        });
        const running = vscode.commands.executeCommand<Record<string, unknown>>('fixpoint.client.flashVerify', 'qemu-m4');
        await began;
        // Let the job get as far as QEMU before cancelling: the cancel must be shown to stop QEMU, so a job
        // that never started it (or finished first) fails here instead of passing without the proof.
        await until('QEMU running for this workspace', () => processesMentioning(folder.fsPath, 'qemu-system').length > 0, 20_000);
        const hadQemu = processesMentioning(folder.fsPath, 'qemu-system').length > 0;
        assert(hadQemu, 'QEMU was not running when the cancel was sent');
        assert(api.server.progress!.cancelAll() === 1, 'no job to cancel');
        const result = await running;
        assert(result && result.ok === false && /cancelled/.test(String(result.error)), `after cancel: ${JSON.stringify(result).slice(0, 400)}`);
        await until('the cancelled CLI to exit', () => processesMentioning(folder.fsPath, 'quantcore.cli').length === 0, 10_000);
        // The server stops the job's whole process group: SIGTERM, then SIGKILL after a 2 s grace.
        await until('QEMU to exit', () => processesMentioning(folder.fsPath, 'qemu-system').length === 0, 5_000).catch(() => undefined);
        const orphans = processesMentioning(folder.fsPath, 'qemu-system');
        for (const o of orphans) process.kill(Number(o.split(':')[0]), 'SIGKILL');
        assert(orphans.length === 0, `left running after cancel: ${orphans.join(' | ')}`);
        return { error: result.error, qemuWasRunning: hadQemu, orphanedQemu: orphans };
      });
    } else {
      steps.push({ name: 'flash and verify on qemu-m4, show report, cancel: skipped (FIXPOINT_E2E_FLASH is not 1)', ok: true, ms: 0, skipped: true });
    }

    await pythonExtensionSteps(step, api, folder.fsPath);
  } finally {
    // The workbench phase after this one shares the user settings.
    await config().update('severity.stale-generated', undefined, vscode.ConfigurationTarget.Global).then(undefined, () => undefined);
    await config().update('python', undefined, vscode.ConfigurationTarget.Workspace).then(undefined, () => undefined);
    const failed = steps.filter((s) => !s.ok).length;
    if (out) fs.writeFileSync(out, JSON.stringify({ ok: failed === 0, steps }, null, 2));
  }
}

/**
 * Restricted Mode (code-server with workspace trust on, the folder not trusted): diagnostics and their
 * quick-fix edits only. The workspace's settings (fixpoint.python -> its .venv) and its virtualenv are
 * not used, no build command reaches the server, and the code action's "Regenerate model" is refused.
 */
async function runUntrusted(): Promise<void> {
  const out = process.env.FIXPOINT_E2E_OUT;
  const work = process.env.FIXPOINT_E2E_WORK ?? '';
  const steps: Step[] = [];
  const step = stepRunner(steps);
  try {
    const folder = vscode.workspace.workspaceFolders![0].uri;
    const modelC = vscode.Uri.joinPath(folder, 'src', 'model', 'model.c');
    const params = vscode.Uri.joinPath(folder, 'model', 'residual.params.json');
    const generated = fs.readFileSync(modelC.fsPath, 'utf8');
    let api!: FixpointApi;

    await step('untrusted: the server starts with the user\'s interpreter, not the workspace\'s', async () => {
      assert(!vscode.workspace.isTrusted, 'the workspace is trusted: the test needs Restricted Mode');
      const ext = vscode.extensions.getExtension<FixpointApi>('fixpoint.fixpoint');
      assert(ext, 'extension fixpoint.fixpoint not found');
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(modelC));
      api = await ext.activate();
      await api.ready();
      const command = api.server.interpreter?.command ?? '';
      assert(!command.startsWith(folder.fsPath), `interpreter from the workspace: ${command}`);
      assert(api.server.interpreter?.source === 'setting', `interpreter source ${api.server.interpreter?.source}`);
      assert(api.status.serverText.includes('$(shield)'), `status bar: ${api.status.serverText}`);
      return { interpreter: api.server.interpreter, status: api.status.serverText };
    });

    await step('untrusted: diagnostics and quick-fix edits still work', async () => {
      await until('stale-generated on model.c', () => fixpointDiagnostics(modelC, 'stale-generated').length > 0);
      await vscode.workspace.openTextDocument(params);
      const [zp] = await until('wrong-zero-point', () => fixpointDiagnostics(params, 'wrong-zero-point').length > 0 && fixpointDiagnostics(params, 'wrong-zero-point'));
      const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', params, zp.range);
      assert((actions ?? []).some((a) => a.edit && /zero point/i.test(a.title)), 'no quick fix');
      return (actions ?? []).map((a) => a.title);
    });

    await step('untrusted: no build, regenerate or flash reaches the server', async () => {
      const results = {
        regenerate: await vscode.commands.executeCommand('fixpoint.client.regenerateModel'),
        quantize: await vscode.commands.executeCommand('fixpoint.client.quantize', { model: 'model/residual.onnx', data: 'x.npz', output: 'o.params.json' }),
        flashVerify: await vscode.commands.executeCommand('fixpoint.client.flashVerify', 'qemu-m4'),
        codeActionRegenerate: await vscode.commands.executeCommand('fixpoint.regenerateModel', folder.fsPath, false),
      };
      for (const [what, r] of Object.entries(results)) assert(r === undefined, `${what} ran: ${JSON.stringify(r)}`);
      await sleep(1500);
      assert(fs.readFileSync(modelC.fsPath, 'utf8') === generated, 'model.c was rewritten');
      assert(!fs.existsSync(vscode.Uri.joinPath(folder, 'build').fsPath), 'a build folder appeared');
      assert(fixpointDiagnostics(modelC, 'stale-generated').length > 0, 'stale-generated went away');
      return results;
    });

    await step('untrusted: read-only commands work; the workspace\'s interpreter never ran', async () => {
      const check = await vscode.commands.executeCommand<Record<string, unknown>>('fixpoint.client.checkWorkspace');
      assert(check && check.ok === true, JSON.stringify(check));
      assert(work && !fs.existsSync(`${work}/RAN-WORKSPACE-PYTHON`), 'the workspace .venv python was run');
      return check;
    });

    await pythonExtensionUntrustedStep(step, api, folder.fsPath, work);
  } finally {
    const failed = steps.filter((s) => !s.ok).length;
    if (out) fs.writeFileSync(out, JSON.stringify({ ok: failed === 0, steps }, null, 2));
  }
}
