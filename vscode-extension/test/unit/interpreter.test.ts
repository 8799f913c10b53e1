import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import {
  chooseInterpreter, environmentsApi, EnvironmentPath, expandPath, Interpreter, noServerMessage, passedOverNote, probe,
  ProbeResult, problemActions, problemMessage, PythonEnvironmentsApi, resolveInterpreter, selectedInterpreter, venvPython,
} from '../../src/interpreter';

const none = () => false;

test('the setting wins over the workspace venv', () => {
  const r = resolveInterpreter({ configured: '/opt/py/bin/python3', folders: ['/ws'], trusted: true, platform: 'linux', exists: () => true });
  assert.equal(r.interpreter.command, '/opt/py/bin/python3');
  assert.equal(r.interpreter.source, 'setting');
});

test('${workspaceFolder}, ~ and relative paths in the setting', () => {
  const r = resolveInterpreter({ configured: '${workspaceFolder}/env/bin/python', folders: ['/ws'], trusted: true, platform: 'linux', exists: none });
  assert.equal(r.interpreter.command, '/ws/env/bin/python');
  assert.equal(expandPath('~/py/bin/python', '/ws', '/home/u'), '/home/u/py/bin/python');
  assert.equal(expandPath('${userHome}/x', '/ws', '/home/u'), '/home/u/x');
  assert.equal(expandPath('${env:FP_TEST_PY}/bin/python', '/ws', '/home/u', { FP_TEST_PY: '/e' }), '/e/bin/python');
  const rel = resolveInterpreter({ configured: 'env/bin/python', folders: ['/ws'], trusted: true, platform: 'linux', exists: none });
  assert.equal(rel.interpreter.command, '/ws/env/bin/python');
  const bare = resolveInterpreter({ configured: 'python3.11', folders: ['/ws'], trusted: true, platform: 'linux', exists: none });
  assert.equal(bare.interpreter.command, 'python3.11', 'a bare command name is looked up on PATH');
});

test('the workspace .venv, then venv, then python3', () => {
  const has = (files: string[]) => (f: string) => files.includes(f);
  let r = resolveInterpreter({ folders: ['/ws'], trusted: true, platform: 'linux', exists: has(['/ws/.venv/bin/python', '/ws/venv/bin/python']) });
  assert.deepEqual([r.interpreter.command, r.interpreter.source], ['/ws/.venv/bin/python', 'venv']);
  r = resolveInterpreter({ folders: ['/ws'], trusted: true, platform: 'linux', exists: has(['/ws/venv/bin/python']) });
  assert.equal(r.interpreter.command, '/ws/venv/bin/python');
  r = resolveInterpreter({ configured: '  ', folders: ['/ws'], trusted: true, platform: 'linux', exists: none });
  assert.deepEqual([r.interpreter.command, r.interpreter.source], ['python3', 'path']);
  r = resolveInterpreter({ folders: ['C:\\ws'], trusted: true, platform: 'win32', exists: none });
  assert.equal(r.interpreter.command, 'python');
  assert.equal(venvPython('/ws/.venv', 'win32'), path.join('/ws/.venv', 'Scripts', 'python.exe'));
});

test('untrusted: no workspace venv, no interpreter inside the workspace', () => {
  let r = resolveInterpreter({ folders: ['/ws'], trusted: false, platform: 'linux', exists: () => true });
  assert.equal(r.interpreter.command, 'python3');
  assert.match(r.notes.join('\n'), /virtualenv is not used/);
  r = resolveInterpreter({ configured: '/ws/.venv/bin/python', folders: ['/ws'], trusted: false, platform: 'linux', exists: () => true });
  assert.equal(r.interpreter.command, 'python3');
  assert.match(r.notes.join('\n'), /inside the untrusted workspace/);
  r = resolveInterpreter({ configured: '/usr/local/bin/python3.11', folders: ['/ws'], trusted: false, platform: 'linux', exists: () => true });
  assert.equal(r.interpreter.command, '/usr/local/bin/python3.11', "the user's own interpreter outside the workspace is fine");
});

test('probe: a missing interpreter', async () => {
  const r = await probe('/nonexistent/bin/python3');
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.reason, 'not-found');
  const msg = problemMessage({ command: '/nonexistent/bin/python3', source: 'setting', origin: 'the fixpoint.python setting' }, r as never);
  assert.match(msg, /was not found/);
  assert.match(msg, /fixpoint\.python/);
});

test('probe: an interpreter without the server package', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fp-probe-'));
  const fake = path.join(dir, 'python');
  // A stand-in "python" that fails the import the way CPython does.
  fs.writeFileSync(fake, "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'fixpoint_server'\" >&2\nexit 1\n", { mode: 0o755 });
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const r = await probe(fake, { cwd: dir });
  assert.equal(!r.ok && r.reason, 'no-package');
  const msg = problemMessage({ command: fake, source: 'venv', origin: "the workspace's .venv" }, r as never);
  assert.match(msg, /cannot import the language server/);
  assert.match(msg, /-m pip install/);
});

// The interpreter with Fixpoint installed: $FIXPOINT_PYTHON (make test sets it), else the repository's .venv.
// Absent, the tests that need it are skipped; under FIXPOINT_REQUIRE_TARGETS=1 (CI) they run, and fail.
const REPO_PYTHON = process.env.FIXPOINT_PYTHON || path.resolve(__dirname, '../../../../.venv/bin/python');
const NO_REPO_PYTHON = !fs.existsSync(REPO_PYTHON) && process.env.FIXPOINT_REQUIRE_TARGETS !== '1' && `no ${REPO_PYTHON}`;

test('probe: the repository venv has the server', { skip: NO_REPO_PYTHON }, async () => {
  const r = await probe(REPO_PYTHON, { cwd: os.tmpdir() });
  assert.equal(r.ok, true, JSON.stringify(r));
  assert.match(r.ok ? r.python : '', /^3\.\d+/);
});

// ------------------------------------------------------------- the Python extension's selection

const has = (files: string[]) => (f: string) => files.includes(f);
const commands = (r: { candidates: Interpreter[] }) => r.candidates.map((c) => `${c.source}:${c.command}`);

test('order with the Python extension: setting alone, else its selection, the workspace venvs, PATH', () => {
  const exists = has(['/ws/.venv/bin/python', '/ws/venv/bin/python']);
  let r = resolveInterpreter({ configured: '/opt/py/bin/python3', selected: '/home/u/.pyenv/versions/3.12.4/bin/python', folders: ['/ws'], trusted: true, platform: 'linux', exists });
  assert.deepEqual(commands(r), ['setting:/opt/py/bin/python3'], 'fixpoint.python is explicit: nothing tried behind it');
  r = resolveInterpreter({ selected: '/home/u/.pyenv/versions/3.12.4/bin/python', folders: ['/ws'], trusted: true, platform: 'linux', exists });
  assert.deepEqual(commands(r), [
    'python-extension:/home/u/.pyenv/versions/3.12.4/bin/python', 'venv:/ws/.venv/bin/python', 'venv:/ws/venv/bin/python', 'path:python3',
  ]);
  assert.equal(r.interpreter.origin, "the Python extension's selected interpreter");
  assert.deepEqual(r.notes, []);
  // The Python extension usually picks the workspace's .venv itself: probed once, as its choice.
  r = resolveInterpreter({ selected: '/ws/.venv/bin/../bin/python', folders: ['/ws'], trusted: true, platform: 'linux', exists });
  assert.deepEqual(commands(r), ['python-extension:/ws/.venv/bin/../bin/python', 'venv:/ws/venv/bin/python', 'path:python3']);
  // Without the Python extension: today's order.
  r = resolveInterpreter({ folders: ['/ws', '/ws2'], trusted: true, platform: 'linux', exists: has(['/ws2/.venv/bin/python']) });
  assert.deepEqual(commands(r), ['venv:/ws2/.venv/bin/python', 'path:python3']);
  r = resolveInterpreter({ selected: '/usr/bin/python3', folders: [], trusted: true, platform: 'linux', exists });
  assert.deepEqual(commands(r), ['python-extension:/usr/bin/python3', 'path:python3']);
});

test('untrusted: the Python extension\'s selection is used only outside the workspace', () => {
  let r = resolveInterpreter({ selected: '/ws/.venv/bin/python', folders: ['/ws'], trusted: false, platform: 'linux', exists: () => true });
  assert.deepEqual(commands(r), ['path:python3']);
  assert.deepEqual(r.notes, [
    "the Python extension's selected interpreter (/ws/.venv/bin/python) lies inside the untrusted workspace: not used",
    "the workspace's virtualenv is not used in an untrusted workspace",
  ]);
  r = resolveInterpreter({ selected: '/home/u/.venvs/tools/bin/python', folders: ['/ws'], trusted: false, platform: 'linux', exists: () => true });
  assert.deepEqual(commands(r), ['python-extension:/home/u/.venvs/tools/bin/python', 'path:python3']);
  // A user-level fixpoint.python inside the workspace is refused; the Python extension's choice follows.
  r = resolveInterpreter({ configured: '/ws/env/bin/python', selected: '/usr/bin/python3.11', folders: ['/ws'], trusted: false, platform: 'linux', exists: none });
  assert.deepEqual(commands(r), ['python-extension:/usr/bin/python3.11', 'path:python3']);
  assert.match(r.notes[0], /fixpoint\.python \(\/ws\/env\/bin\/python\) lies inside the untrusted workspace/);
});

test('untrusted: a link outside the workspace to an interpreter inside it is refused (real symlinks)', (t) => {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'fp-link-')));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const ws = path.join(root, 'ws');
  fs.mkdirSync(path.join(ws, 'tools'), { recursive: true });
  fs.writeFileSync(path.join(ws, 'tools', 'python'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
  const outside = path.join(root, 'python-link');
  fs.symlinkSync(path.join(ws, 'tools', 'python'), outside);
  // The workspace opened through a linked folder: the real paths still compare.
  fs.symlinkSync(ws, path.join(root, 'ws-link'));
  const realpath = (f: string) => { try { return fs.realpathSync(f); } catch { return f; } };
  for (const folder of [ws, path.join(root, 'ws-link')]) {
    const r = resolveInterpreter({ selected: outside, folders: [folder], trusted: false, platform: 'linux', exists: fs.existsSync, realpath });
    assert.deepEqual(commands(r), ['path:python3'], folder);
    assert.match(r.notes[0], /lies inside the untrusted workspace: not used/);
    const c = resolveInterpreter({ configured: outside, folders: [folder], trusted: false, platform: 'linux', exists: fs.existsSync, realpath });
    assert.deepEqual(commands(c), ['path:python3'], folder);
  }
  const trusted = resolveInterpreter({ selected: outside, folders: [ws], trusted: true, platform: 'linux', exists: fs.existsSync, realpath });
  assert.deepEqual(commands(trusted), [`python-extension:${outside}`, 'path:python3']);
});

/** A stand-in for the Python extension's exports.environments with the published API's shape. */
function fakeEnvironments(options: {
  active?: EnvironmentPath | undefined; asPromise?: boolean; throws?: Error;
  executables?: Record<string, string | undefined>; resolveThrows?: Error;
}): PythonEnvironmentsApi & { resources: unknown[] } {
  const resources: unknown[] = [];
  return {
    resources,
    getActiveEnvironmentPath(resource?: unknown) {
      resources.push(resource);
      if (options.throws) throw options.throws;
      return options.asPromise ? Promise.resolve(options.active) : options.active;
    },
    async resolveEnvironment(env: EnvironmentPath | string) {
      if (options.resolveThrows) throw options.resolveThrows;
      const key = typeof env === 'string' ? env : env.path;
      const exe = options.executables?.[key];
      return exe === undefined && !(key in (options.executables ?? {})) ? undefined : { executable: { uri: exe === undefined ? undefined : { fsPath: exe } } };
    },
    onDidChangeActiveEnvironmentPath() {
      return { dispose: () => undefined };
    },
  };
}

test('the selected interpreter from the environments API', async () => {
  const folder = { fsPath: '/ws', scheme: 'file' };
  // An environment's folder: resolveEnvironment gives its executable.
  let api = fakeEnvironments({ active: { id: 'conda-env', path: '/opt/conda/envs/fw' }, executables: { '/opt/conda/envs/fw': '/opt/conda/envs/fw/bin/python' } });
  assert.deepEqual(await selectedInterpreter(api, folder), { executable: '/opt/conda/envs/fw/bin/python' });
  assert.deepEqual(api.resources, [folder], 'asked for the first workspace folder');
  // Older releases returned a promise.
  api = fakeEnvironments({ active: { id: 'x', path: '/usr/bin/python3' }, asPromise: true, executables: { '/usr/bin/python3': '/usr/bin/python3' } });
  assert.deepEqual(await selectedInterpreter(api), { executable: '/usr/bin/python3' });
  // An invalid environment (resolveEnvironment gives undefined), or one with no executable.
  api = fakeEnvironments({ active: { id: 'gone', path: '/gone/bin/python' } });
  assert.deepEqual(await selectedInterpreter(api), { note: "the Python extension's selected interpreter (/gone/bin/python) is not a valid environment: not used" });
  api = fakeEnvironments({ active: { id: 'noexe', path: '/envs/x' }, executables: { '/envs/x': undefined } });
  assert.deepEqual(await selectedInterpreter(api), { note: "the Python extension's selected interpreter (/envs/x) is not a valid environment: not used" });
  api = fakeEnvironments({ active: undefined });
  assert.deepEqual(await selectedInterpreter(api), { note: 'no interpreter is selected in the Python extension' });
  api = fakeEnvironments({ throws: new Error('not ready') });
  assert.deepEqual(await selectedInterpreter(api), { note: 'the Python extension did not say which interpreter is selected: not ready' });
  api = fakeEnvironments({ active: { id: 'x', path: '/p' }, resolveThrows: new Error('locator crashed') });
  assert.deepEqual(await selectedInterpreter(api), { note: 'the Python extension could not resolve its selected interpreter (/p): locator crashed' });
});

test('environmentsApi: only a Python extension with the published environments API counts', () => {
  assert.equal(environmentsApi(undefined), undefined);
  assert.equal(environmentsApi({}), undefined, 'a release before the environments API');
  assert.equal(environmentsApi({ settings: { getExecutionDetails: () => ({}) } }), undefined);
  assert.equal(environmentsApi({ environments: { getActiveEnvironmentPath: () => undefined, resolveEnvironment: async () => undefined } }), undefined,
    'no change event: incomplete');
  const api = fakeEnvironments({});
  assert.equal(environmentsApi({ ready: Promise.resolve(), environments: api }), api);
});

const failedProbe = (reason: 'not-found' | 'no-package' | 'failed', detail: string): ProbeResult => ({ ok: false, reason, detail });

test('chooseInterpreter: the first candidate with Fixpoint; the ones passed over, with reasons', async () => {
  const r = resolveInterpreter({ selected: '/usr/bin/python3.12', folders: ['/ws'], trusted: true, platform: 'linux', exists: has(['/ws/.venv/bin/python']) });
  const probed: string[] = [];
  const chosen = await chooseInterpreter(r.candidates, async (i) => {
    probed.push(i.command);
    return i.source === 'venv' ? { ok: true, python: '3.11.2', version: '0.1.0', executable: i.command }
      : failedProbe('no-package', "ModuleNotFoundError: No module named 'fixpoint_server'");
  });
  assert.deepEqual(probed, ['/usr/bin/python3.12', '/ws/.venv/bin/python'], 'PATH is not probed once one has Fixpoint');
  assert.ok(chosen.ok);
  assert.equal(chosen.ok && chosen.interpreter.command, '/ws/.venv/bin/python');
  assert.deepEqual(chosen.ok && chosen.passedOver.map(passedOverNote), [
    "\"/usr/bin/python3.12\" (the Python extension's selected interpreter) passed over: no Fixpoint (ModuleNotFoundError: No module named 'fixpoint_server')",
  ]);
});

test('none has Fixpoint: one message naming each one tried and what to do', async () => {
  const r = resolveInterpreter({ selected: '/usr/bin/python3.12', folders: ['/ws'], trusted: true, platform: 'linux', exists: has(['/ws/.venv/bin/python']) });
  const reasons: Record<string, ProbeResult> = {
    '/usr/bin/python3.12': failedProbe('no-package', "ModuleNotFoundError: No module named 'fixpoint_server'"),
    '/ws/.venv/bin/python': failedProbe('failed', 'SyntaxError: invalid syntax'),
    python3: failedProbe('not-found', 'python3: no such file or command'),
  };
  const chosen = await chooseInterpreter(r.candidates, async (i) => reasons[i.command]);
  assert.equal(chosen.ok, false);
  assert.equal(noServerMessage(chosen.ok ? [] : chosen.failures),
    'Fixpoint: no Python interpreter here has Fixpoint\'s language server. Tried "/usr/bin/python3.12" (the Python ' +
    "extension's selected interpreter): no Fixpoint (ModuleNotFoundError: No module named 'fixpoint_server'); " +
    '"/ws/.venv/bin/python" (the workspace\'s .venv): failed (SyntaxError: invalid syntax); "python3" (python3 from ' +
    'PATH): not found. Install Fixpoint into one (/usr/bin/python3.12 -m pip install <your Fixpoint checkout or wheel>), ' +
    'select an interpreter that has it, or set "fixpoint.python" to one.');
  // A single candidate (the setting): its own message, as before.
  const setting = resolveInterpreter({ configured: '/nonexistent/bin/python3', folders: ['/ws'], trusted: true, platform: 'linux', exists: none });
  const one = await chooseInterpreter(setting.candidates, async () => failedProbe('not-found', 'x'));
  assert.equal(noServerMessage(one.ok ? [] : one.failures), problemMessage(setting.interpreter, failedProbe('not-found', 'x') as never));
});

test('the message\'s buttons: Select Interpreter (the Python extension\'s when its choice counts) and Open Setting', () => {
  const labels = (o: { pythonExtension: boolean; settingUsed: boolean }) => problemActions(o).map((a) => `${a.label}=${a.command}(${a.args.join()})`);
  assert.deepEqual(labels({ pythonExtension: true, settingUsed: false }), [
    'Select Interpreter=python.setInterpreter()', 'Open Setting=workbench.action.openSettings(fixpoint.python)', 'Show Log=fixpoint.client.showOutput()',
  ]);
  const own = ['Select Interpreter...=fixpoint.client.selectInterpreter()', 'Open Setting=workbench.action.openSettings(fixpoint.python)', 'Show Log=fixpoint.client.showOutput()'];
  assert.deepEqual(labels({ pythonExtension: false, settingUsed: false }), own);
  assert.deepEqual(labels({ pythonExtension: true, settingUsed: true }), own, 'fixpoint.python overrides the Python extension: its picker would change nothing');
});

test('real interpreters: the Python extension\'s choice lacks Fixpoint, the workspace .venv has it', {
  skip: NO_REPO_PYTHON,
}, async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fp-choose-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const ws = path.join(root, 'ws');
  fs.mkdirSync(path.join(ws, '.venv', 'bin'), { recursive: true });
  // The workspace's .venv: a launcher of the repository's interpreter (which has the server).
  fs.writeFileSync(path.join(ws, '.venv', 'bin', 'python'), `#!/bin/sh\nexec "${REPO_PYTHON}" "$@"\n`, { mode: 0o755 });
  // The interpreter selected in the Python extension: Python without Fixpoint (-I -S: no site-packages at all).
  const selected = path.join(root, 'system-python');
  fs.writeFileSync(selected, '#!/bin/sh\nexec python3 -I -S "$@"\n', { mode: 0o755 });
  const api = fakeEnvironments({ active: { id: 'sys', path: selected }, executables: { [selected]: selected } });
  const selection = await selectedInterpreter(api, { fsPath: ws });
  const r = resolveInterpreter({ selected: selection.executable, folders: [ws], trusted: true, exists: fs.existsSync });
  const chosen = await chooseInterpreter(r.candidates, (i) => probe(i.command, { cwd: root }));
  assert.ok(chosen.ok, JSON.stringify(chosen));
  assert.equal(chosen.ok && chosen.interpreter.source, 'venv');
  assert.equal(chosen.ok && chosen.passedOver.length, 1);
  assert.match(chosen.ok ? passedOverNote(chosen.passedOver[0]) : '', /system-python" \(the Python extension's selected interpreter\) passed over: no Fixpoint \(ModuleNotFoundError: No module named 'fixpoint_server'\)/);
});
