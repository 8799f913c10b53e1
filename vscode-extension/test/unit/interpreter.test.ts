import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { expandPath, probe, problemMessage, resolveInterpreter, venvPython } from '../../src/interpreter';

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

test('probe: the repository venv has the server', { skip: !fs.existsSync(path.resolve(__dirname, '../../../../.venv/bin/python')) && 'no ../.venv' }, async () => {
  const r = await probe(path.resolve(__dirname, '../../../../.venv/bin/python'), { cwd: os.tmpdir() });
  assert.equal(r.ok, true, JSON.stringify(r));
  assert.match(r.ok ? r.python : '', /^3\.\d+/);
});
