// The interpreter selected in Microsoft's Python extension, inside real VS Code. The real ms-python.python
// cannot be installed offline: scripts/e2e.sh installs test/fixture/ms-python-standin, an extension with
// the same id whose `environments` has the calls Fixpoint makes, and whose command pythonStandin.select
// changes the selection and fires onDidChangeActiveEnvironmentPath as the real one does.
// fixpoint.python is set for the whole code-server (Remote settings, by e2e.sh); these steps empty it
// (the default, "") where they need the Python extension's choice to count, and put it back at the end.

import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { FixpointApi } from '../../src/extension';
import { assert, processesMentioning, restarted, Skip, until } from './helpers';

const STANDIN_ID = 'ms-python.python';
const ORIGIN = "the Python extension's selected interpreter";

interface Standin { setInterpreterCalls: number }

type StepFn = (name: string, fn: () => Promise<unknown>) => Promise<void>;

/** The stand-in, activated (installed by e2e.sh: missing is a failure, not a skip). */
async function standin(): Promise<Standin> {
  const ext = vscode.extensions.getExtension<{ standin: Standin }>(STANDIN_ID);
  assert(ext, `${STANDIN_ID} (test/fixture/ms-python-standin) is not installed in this code-server`);
  return (await ext.activate()).standin;
}

async function select(python: string | undefined): Promise<void> {
  await vscode.commands.executeCommand('pythonStandin.select', python);
}

/** Can `python` (a path, or a command looked up in the extension host's PATH) import the server package? */
function hasFixpoint(python: string): boolean {
  try {
    execFileSync(python, ['-c', 'import fixpoint_server'], { stdio: 'ignore', timeout: 30_000, cwd: '/' });
    return true;
  } catch {
    return false;
  }
}

interface ServerProcess { pid: number; cmd: string }

/**
 * The language servers running in `folder` (the server's cwd when trusted): `<python> -m fixpoint_server
 * --stdio`, not the interpreter checks nor the server's warm workers (`-m fixpoint_server.zygote`).
 */
function servers(folder: string): ServerProcess[] {
  return processesMentioning(folder, 'fixpoint_server')
    .map((p) => ({ pid: Number(p.slice(0, p.indexOf(':'))), cmd: p.slice(p.indexOf(': ') + 2).trim() }))
    .filter((p) => / -m fixpoint_server --stdio$/.test(p.cmd));
}

/** Exactly one server runs in `folder`, started by `python`, and not the one that ran before (`old`). */
async function serverStartedBy(folder: string, python: string, old: ServerProcess[]): Promise<ServerProcess> {
  const [server] = await until(`one new server in ${folder}, started by ${python}`, () => {
    const found = servers(folder);
    return found.length === 1 && found[0].cmd === `${python} -m fixpoint_server --stdio` &&
      !old.some((o) => o.pid === found[0].pid) && found;
  }, 15_000).catch((e: Error) => { throw new Error(`${e.message}; before: ${JSON.stringify(old)}; now: ${JSON.stringify(servers(folder))}`); });
  return server;
}

interface ErrorCall { message: string; items: string[] }

/**
 * Records the error messages the extension shows (the test and the extension share one vscode API object:
 * extensionTestsPath lies in the extension's folder) and answers them with `answer.label`, as a click on
 * that button would; the real message is still shown.
 */
function recordErrorMessages(answer: { label: string | undefined }): { calls: ErrorCall[]; restore(): void } {
  const window = vscode.window as unknown as { showErrorMessage: (message: string, ...items: unknown[]) => Thenable<unknown> };
  const original = window.showErrorMessage;
  const calls: ErrorCall[] = [];
  window.showErrorMessage = (message: string, ...items: unknown[]) => {
    calls.push({ message, items: items.filter((i): i is string => typeof i === 'string') });
    void original.call(vscode.window, message, ...items);
    return Promise.resolve(answer.label);
  };
  return { calls, restore: () => void (window.showErrorMessage = original) };
}

/** The trusted workspace (no .venv of its own): the Python extension's selection starts the server. */
export async function pythonExtensionSteps(step: StepFn, api: FixpointApi, folder: string): Promise<void> {
  const config = () => vscode.workspace.getConfiguration('fixpoint');
  const python = process.env.FIXPOINT_E2E_PYTHON ?? '';
  try {
    await step('the Python extension\'s selected interpreter starts the server (fixpoint.python empty)', async () => {
      assert(path.isAbsolute(python) && hasFixpoint(python), `FIXPOINT_E2E_PYTHON (${python}) cannot import fixpoint_server`);
      assert(!fs.existsSync(path.join(folder, '.venv')) && !fs.existsSync(path.join(folder, 'venv')), 'the workspace has a virtualenv');
      await standin();
      await select(python);
      const old = servers(folder);
      const states = await restarted(api, () => config().update('python', '', vscode.ConfigurationTarget.Workspace));
      const { command, source, origin } = api.server.interpreter ?? {};
      assert(command === python && source === 'python-extension' && origin === ORIGIN,
        `interpreter: ${JSON.stringify(api.server.interpreter)}`);
      return { states, before: old, server: await serverStartedBy(folder, python, old) };
    });

    await step('a new selection in the Python extension restarts the server with that interpreter', async () => {
      // Another path to an interpreter with Fixpoint: the venv's python3 next to its python.
      const other = path.join(path.dirname(python), 'python3');
      if (other === python || !fs.existsSync(other) || !hasFixpoint(other)) throw new Skip(`no second interpreter with Fixpoint (${other})`);
      const old = servers(folder);
      const states = await restarted(api, () => select(other));
      assert(api.server.interpreter?.command === other && api.server.interpreter.source === 'python-extension',
        `interpreter: ${JSON.stringify(api.server.interpreter)}`);
      return { states, before: old, server: await serverStartedBy(folder, other, old) };
    });

    await step('a selected interpreter without Fixpoint: one error message naming it, Select Interpreter / Open Setting', async () => {
      const without = '/usr/bin/python3';
      if (!fs.existsSync(without) || hasFixpoint(without)) throw new Skip(`${without} is missing or has Fixpoint`);
      if (hasFixpoint('python3')) throw new Skip('python3 from PATH has Fixpoint: the server would start from it');
      const answer = { label: 'Open Setting' as string | undefined };
      const shown = recordErrorMessages(answer);
      const { setInterpreterCalls } = await standin();
      try {
        const states = await restarted(api, () => select(without), 'no-python');
        await until('the error message', () => shown.calls.length > 0, 10_000);
        const [call, ...more] = shown.calls;
        assert(more.length === 0, `${shown.calls.length} error messages: ${JSON.stringify(shown.calls)}`);
        const expected = 'Fixpoint: no Python interpreter here has Fixpoint\'s language server. Tried ' +
          `"${without}" (${ORIGIN}): no Fixpoint (ModuleNotFoundError: No module named 'fixpoint_server'); ` +
          '"python3" (python3 from PATH): no Fixpoint (';
        assert(call.message.startsWith(expected), `message: ${call.message}`);
        assert(call.message === api.server.problem, `problem: ${api.server.problem}`);
        assert(JSON.stringify(call.items) === JSON.stringify(['Select Interpreter', 'Open Setting', 'Show Log']), `buttons: ${JSON.stringify(call.items)}`);
        // "Open Setting" opens the Settings editor.
        await until('the Settings editor', () => vscode.window.tabGroups.activeTabGroup.activeTab?.label === 'Settings', 10_000)
          .catch((e: Error) => { throw new Error(`${e.message}; active tab: ${vscode.window.tabGroups.activeTabGroup.activeTab?.label}`); });
        await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
        // "Select Interpreter" is the Python extension's own picker (python.setInterpreter).
        answer.label = 'Select Interpreter';
        await vscode.commands.executeCommand('fixpoint.client.showServerProblem');
        await until('python.setInterpreter to run', async () => (await standin()).setInterpreterCalls === setInterpreterCalls + 1, 10_000);
        return { states, message: call.message, buttons: call.items };
      } finally {
        shown.restore();
      }
    });
  } finally {
    await select(python).then(undefined, () => undefined);
    await config().update('python', undefined, vscode.ConfigurationTarget.Workspace).then(undefined, () => undefined);
  }
}

/**
 * Restricted Mode: the Python extension's selection is the workspace's own .venv python (e2e.sh makes
 * it leave a mark when run). With the user's fixpoint.python emptied it is refused: never probed, never
 * started; python3 from PATH is the only candidate.
 */
export async function pythonExtensionUntrustedStep(step: StepFn, api: FixpointApi, folder: string, work: string): Promise<void> {
  const config = () => vscode.workspace.getConfiguration('fixpoint');
  const before = config().inspect<string>('python')?.globalValue;
  try {
    await step('untrusted: an interpreter the Python extension selected inside the workspace is not used', async () => {
      const inside = path.join(folder, '.venv', 'bin', 'python');
      assert(fs.existsSync(inside), `no ${inside}`);
      await standin();
      await select(inside);
      const pathHasFixpoint = hasFixpoint('python3');
      const states = await restarted(api, () => config().update('python', '', vscode.ConfigurationTarget.Global),
        pathHasFixpoint ? 'running' : 'no-python');
      assert(config().inspect<string>('python')?.globalValue === '', `fixpoint.python (user): ${JSON.stringify(config().inspect('python'))}`);
      const { command, source } = api.server.interpreter ?? {};
      assert(command === 'python3' && source === 'path', `interpreter: ${JSON.stringify(api.server.interpreter)}`);
      if (!pathHasFixpoint) {
        // The one candidate left is PATH's: the message names it alone.
        assert(api.server.problem.startsWith('Fixpoint: "python3" (python3 from PATH) cannot import the language server'),
          `problem: ${api.server.problem}`);
      }
      assert(!api.server.problem.includes(inside), `the problem names the workspace's python: ${api.server.problem}`);
      assert(!fs.existsSync(`${work}/RAN-WORKSPACE-PYTHON`), 'the workspace .venv python was run');
      return { states, interpreter: api.server.interpreter, problem: api.server.problem };
    });
  } finally {
    await select(undefined).then(undefined, () => undefined);
    await config().update('python', before, vscode.ConfigurationTarget.Global).then(undefined, () => undefined);
  }
}
