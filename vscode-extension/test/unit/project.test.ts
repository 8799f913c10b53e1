import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseProject, readTomlTables, targetChoices } from '../../src/project';
import { applySeverity, RULES, severityOverrides } from '../../src/severity';
import { ServerLogParser } from '../../src/serverlog';
import { commandAllowed } from '../../src/trust';

const TOML = `
model = "model/kws.onnx"   # the float model
params = 'model/kws.params.json'
target = "qemu-m4"
alignment = 16

[board]
name = "nucleo-f446"
core = "cortex-m4"
flash_origin = 0x0800_0000

[flash]
backend = "pyocd"
serial = "/dev/ttyACM0"   # "quoted # not a comment"

[checks.severity]
"kernel-opt-level" = "error"
`;

test('fixpoint.toml: root keys, tables, comments, numbers', () => {
  const p = parseProject(TOML);
  assert.equal(p.model, 'model/kws.onnx');
  assert.equal(p.params, 'model/kws.params.json');
  assert.equal(p.target, 'qemu-m4');
  assert.deepEqual(p.board, { name: 'nucleo-f446', core: 'cortex-m4' });
  assert.deepEqual(p.flash, { backend: 'pyocd', serial: '/dev/ttyACM0', probe: undefined });
  const tables = readTomlTables(TOML);
  assert.equal(tables.get('board')!.get('flash_origin'), 0x08000000);
  assert.equal(tables.get('checks.severity')!.get('kernel-opt-level'), 'error');
  assert.equal(readTomlTables('a = "x # y" # z').get('')!.get('a'), 'x # y');
});

test('targets: the configured one first, the board among them', () => {
  const p = parseProject(TOML);
  const names = targetChoices(p).map((c) => c.name);
  assert.deepEqual(names, ['qemu-m4', 'nucleo-f446', 'qemu-m7', 'qemu-m55', 'host']);
  assert.equal(targetChoices(p)[0].isDefault, true);
  const board = targetChoices(p, 'board')[0];
  assert.equal(board.name, 'nucleo-f446');
  assert.equal(board.kind, 'board');
  assert.match(board.description, /pyocd/);
  assert.deepEqual(targetChoices(undefined).map((c) => c.name), ['host', 'qemu-m4', 'qemu-m7', 'qemu-m55']);
  assert.deepEqual(targetChoices(parseProject('target = "qemu-m99"')).map((c) => c.name)[0], 'qemu-m99');
});

test('severities: overrides from the settings, "off" hides', () => {
  const o = severityOverrides({ 'stale-generated': 'error', 'misaligned-array': 'off', 'kernel-opt-level': 'default', 'nope': 'error', 'unscaled-bias': 'loud' });
  assert.deepEqual(o, { 'stale-generated': 'error', 'misaligned-array': 'off' });
  assert.equal(applySeverity('stale-generated', 1, o), 0);
  assert.equal(applySeverity('misaligned-array', 1, o), null);
  assert.equal(applySeverity('wrong-zero-point', 0, o), 0);
  assert.equal(applySeverity(undefined, 2, o), 2);
  assert.equal(RULES.length, 9);
});

test('trust: build commands need a trusted workspace', () => {
  for (const c of ['fixpoint.regenerateModel', 'fixpoint.quantize', 'fixpoint.flashVerify', 'fixpoint.somethingNew']) {
    assert.equal(commandAllowed(c, false), false, c);
    assert.equal(commandAllowed(c, true), true, c);
  }
  assert.equal(commandAllowed('fixpoint.checkWorkspace', false), true);
  assert.equal(commandAllowed('fixpoint.lastReport', false), true);
});

test('server log: Python logging levels, pygls wire chatter as trace, tracebacks stay errors', () => {
  const p = new ServerLogParser();
  assert.deepEqual(p.line('2026-12-03 07:27:51,067 fixpoint_server.checker INFO check 1: 4 findings in 183 ms'),
    { level: 'info', text: '[server] fixpoint_server.checker: check 1: 4 findings in 183 ms' });
  assert.equal(p.line('2026-12-03 07:27:51,070 pygls.protocol.json_rpc INFO Sending data: {"id": 1}').level, 'trace');
  assert.equal(p.line('2026-12-03 07:27:50,795 pygls.feature_manager INFO Registered builtin feature exit').level, 'debug');
  assert.equal(p.line('2026-12-03 07:27:50,795 fixpoint_server.watcher WARNING cannot watch /x').level, 'warn');
  assert.equal(p.line('2026-12-03 07:27:50,795 pygls.server ERROR boom').level, 'error');
  assert.equal(p.line('Traceback (most recent call last):').level, 'error');
  assert.equal(new ServerLogParser().line('plain text').level, 'info');
});
