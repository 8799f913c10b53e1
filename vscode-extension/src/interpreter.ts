// Which Python starts the language server, and whether it can. The candidates, in order:
//   1. the fixpoint.python setting - when set, the only candidate (an explicit choice is reported, not
//      silently passed over);
//   2. the interpreter selected in Microsoft's Python extension (ms-python.python), when it is installed -
//      its published environments API, as the ruff, black and pylint extensions use it;
//   3. the workspace's virtualenv (.venv, venv);
//   4. python3 from PATH.
// The first candidate that can import the server package starts it. In an untrusted workspace only the
// user's own setting, the Python extension's choice and PATH count, and never an interpreter inside the
// workspace (by its path or the file it links to): the Python extension may have picked the
// workspace's .venv, and running it would run the workspace's code (see trust.ts).
// No vscode import: unit-tested with node --test (the Python extension's API is typed structurally here).

import { execFile } from 'child_process';
import * as path from 'path';

export type InterpreterSource = 'setting' | 'python-extension' | 'venv' | 'path';

export interface Interpreter {
  command: string;
  source: InterpreterSource;
  /** For messages: where the interpreter came from. */
  origin: string;
}

export interface ResolveInputs {
  /** The fixpoint.python setting (the user-level value only, in an untrusted workspace). */
  configured?: string;
  /** The interpreter selected in the Python extension (its executable), when it is installed. */
  selected?: string;
  /** The workspace folders' paths. */
  folders: string[];
  trusted: boolean;
  platform?: NodeJS.Platform;
  home?: string;
  exists: (file: string) => boolean;
  /** The file a path links to (fs.realpathSync); the path itself when it cannot be resolved. */
  realpath?: (file: string) => string;
}

export interface Resolution {
  /** The first candidate: the one the user expects, named in messages. */
  interpreter: Interpreter;
  /** Every candidate in order of preference, the first one included; probed in this order. */
  candidates: Interpreter[];
  /** Why a configured, selected or workspace interpreter was passed over (shown in the log). */
  notes: string[];
}

export const SETTING_ORIGIN = 'the fixpoint.python setting';
export const PYTHON_EXTENSION_ORIGIN = "the Python extension's selected interpreter";

/** The virtualenv folders looked for in each workspace folder, in this order. */
export const VENV_DIRS = ['.venv', 'venv'];

export function venvPython(venv: string, platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? path.join(venv, 'Scripts', 'python.exe') : path.join(venv, 'bin', 'python');
}

/** ${workspaceFolder}, ${userHome}, a leading ~ and ${env:NAME} in a configured path. */
export function expandPath(value: string, folder: string | undefined, home: string | undefined,
  env: NodeJS.ProcessEnv = process.env): string {
  let out = value.trim();
  if (home && (out === '~' || out.startsWith('~/'))) out = home + out.slice(1);
  out = out.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (whole, name: string, envName?: string) => {
    if (name === 'workspaceFolder') return folder ?? whole;
    if (name === 'userHome') return home ?? whole;
    return env[envName ?? ''] ?? '';
  });
  return out;
}

export function isInside(file: string, folder: string): boolean {
  const rel = path.relative(path.resolve(folder), path.resolve(file));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * Does `file` lie in a workspace folder, by its own path or by the file it links to? (A venv's python
 * links to the system's, but runs the venv's packages: its own path counts. A link outside the
 * workspace to a file inside runs the workspace's file: the target counts too.)
 */
export function inWorkspace(file: string, folders: string[], realpath: (file: string) => string = (f) => f): boolean {
  const real = realpath(file);
  return folders.some((f) => isInside(file, f) || isInside(real, f) || isInside(real, realpath(f)));
}

export function resolveInterpreter(inputs: ResolveInputs): Resolution {
  const platform = inputs.platform ?? process.platform;
  const realpath = inputs.realpath ?? ((f: string) => f);
  const notes: string[] = [];
  const candidates: Interpreter[] = [];
  const add = (candidate: Interpreter) => {
    if (!candidates.some((c) => samePath(c.command, candidate.command))) candidates.push(candidate);
  };
  const done = (): Resolution => ({ interpreter: candidates[0], candidates, notes });

  const configured = inputs.configured?.trim();
  if (configured) {
    const command = expandPath(configured, inputs.folders[0], inputs.home);
    const looksLikePath = command.includes('/') || command.includes('\\');
    const absolute = looksLikePath && !path.isAbsolute(command) && inputs.folders[0]
      ? path.resolve(inputs.folders[0], command) : command;
    if (!inputs.trusted && looksLikePath && inWorkspace(absolute, inputs.folders, realpath)) {
      notes.push(`fixpoint.python (${configured}) lies inside the untrusted workspace: not started`);
    } else {
      add({ command: absolute, source: 'setting', origin: SETTING_ORIGIN });
      return done(); // an explicit choice: nothing is tried behind it
    }
  }
  const selected = inputs.selected?.trim();
  if (selected) {
    if (!inputs.trusted && inWorkspace(selected, inputs.folders, realpath)) {
      notes.push(`${PYTHON_EXTENSION_ORIGIN} (${selected}) lies inside the untrusted workspace: not used`);
    } else {
      add({ command: selected, source: 'python-extension', origin: PYTHON_EXTENSION_ORIGIN });
    }
  }
  const venvs = inputs.folders
    .flatMap((folder) => VENV_DIRS.map((dir) => ({ dir, python: venvPython(path.join(folder, dir), platform) })))
    .filter((v) => inputs.exists(v.python));
  if (inputs.trusted) {
    for (const v of venvs) add({ command: v.python, source: 'venv', origin: `the workspace's ${v.dir}` });
  } else if (venvs.length) {
    notes.push("the workspace's virtualenv is not used in an untrusted workspace");
  }
  const fallback = platform === 'win32' ? 'python' : 'python3';
  add({ command: fallback, source: 'path', origin: `${fallback} from PATH` });
  return done();
}

/** The same interpreter twice (the Python extension often selects the workspace's .venv). */
function samePath(a: string, b: string): boolean {
  return a === b || (path.isAbsolute(a) && path.isAbsolute(b) && path.resolve(a) === path.resolve(b));
}

// --------------------------------------------------------------------- Microsoft's Python extension

/** The extension whose selected interpreter is used when it is installed (optional: not a dependency). */
export const PYTHON_EXTENSION_ID = 'ms-python.python';

/** A path as the Python extension reports it: an interpreter, or an environment's folder. */
export interface EnvironmentPath {
  readonly id: string;
  readonly path: string;
}

/**
 * The part of the Python extension's published API (`exports.environments`) used here, typed locally
 * (no npm dependency). `resource` is a vscode.Uri, typed loosely so that the unit tests need no vscode.
 */
export interface PythonEnvironmentsApi {
  /** Synchronous in the published API; older releases returned a promise: both are awaited. */
  getActiveEnvironmentPath(resource?: unknown): EnvironmentPath | undefined | Promise<EnvironmentPath | undefined>;
  resolveEnvironment(environment: EnvironmentPath | string):
    Promise<{ readonly executable: { readonly uri?: { readonly fsPath: string } } } | undefined>;
  onDidChangeActiveEnvironmentPath(listener: (e: EnvironmentPath) => unknown): { dispose(): unknown };
}

/** exports.environments of the Python extension, if it has the published API (old releases do not). */
export function environmentsApi(exports: unknown): PythonEnvironmentsApi | undefined {
  const envs = (exports as { environments?: Record<string, unknown> } | undefined)?.environments;
  const has = (name: keyof PythonEnvironmentsApi) => typeof envs?.[name] === 'function';
  return has('getActiveEnvironmentPath') && has('resolveEnvironment') && has('onDidChangeActiveEnvironmentPath')
    ? envs as unknown as PythonEnvironmentsApi : undefined;
}

export interface Selection {
  /** The selected interpreter's executable; undefined when there is none to use. */
  executable?: string;
  /** Why there is none (for the log). */
  note?: string;
}

/**
 * The executable of the interpreter selected in the Python extension for `resource`. The active path
 * may name an environment's folder: resolveEnvironment gives its executable. A failing API becomes a
 * note, never an error: the other candidates remain.
 */
export async function selectedInterpreter(api: PythonEnvironmentsApi, resource?: unknown): Promise<Selection> {
  let active: EnvironmentPath | undefined;
  try {
    active = await api.getActiveEnvironmentPath(resource);
  } catch (err) {
    return { note: `the Python extension did not say which interpreter is selected: ${errorText(err)}` };
  }
  if (!active?.path) return { note: 'no interpreter is selected in the Python extension' };
  try {
    const executable = (await api.resolveEnvironment(active))?.executable.uri?.fsPath;
    if (executable) return { executable };
    return { note: `${PYTHON_EXTENSION_ORIGIN} (${active.path}) is not a valid environment: not used` };
  } catch (err) {
    return { note: `the Python extension could not resolve its selected interpreter (${active.path}): ${errorText(err)}` };
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ------------------------------------------------------------------------------------- probing

export type ProbeResult =
  | { ok: true; python: string; version: string; executable: string }
  | { ok: false; reason: 'not-found' | 'no-package' | 'failed'; detail: string };

/** The one-liner run by probe(): imports the server package, prints versions and the executable. */
export const PROBE_CODE =
  'import sys, fixpoint_server; print(sys.version.split()[0], fixpoint_server.__version__, sys.executable)';

/**
 * Can `command` start the server? Runs `command -c "import fixpoint_server ..."` with `cwd` (outside the
 * workspace: `python -c` puts its cwd on sys.path) and a timeout.
 */
export function probe(command: string, options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(command, ['-c', PROBE_CODE], { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 30000, windowsHide: true },
      (error, stdout, stderr) => {
        if (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === 'ENOENT' || code === 'EACCES') {
            resolve({ ok: false, reason: 'not-found', detail: `${command}: ${code === 'ENOENT' ? 'no such file or command' : 'not executable'}` });
          } else if (/No module named '?fixpoint_server/.test(stderr) || /ModuleNotFoundError|ImportError/.test(stderr)) {
            resolve({ ok: false, reason: 'no-package', detail: lastLine(stderr) });
          } else {
            resolve({ ok: false, reason: 'failed', detail: lastLine(stderr) || error.message });
          }
          return;
        }
        const [python = '', version = '', ...exe] = stdout.trim().split(/\s+/);
        resolve({ ok: true, python, version, executable: exe.join(' ') });
      });
  });
}

function lastLine(text: string): string {
  const lines = text.trim().split(/\r?\n/);
  return lines[lines.length - 1] ?? '';
}

/** The message (and what fixes it) when the interpreter cannot start the server. */
export function problemMessage(interpreter: Interpreter, result: Exclude<ProbeResult, { ok: true }>): string {
  const who = `"${interpreter.command}" (${interpreter.origin})`;
  switch (result.reason) {
    case 'not-found':
      return `Fixpoint: the Python interpreter ${who} was not found. Set "fixpoint.python" to a Python 3.11 ` +
        'that has Fixpoint installed, or create the workspace\'s .venv.';
    case 'no-package':
      return `Fixpoint: ${who} cannot import the language server (${result.detail}). Install Fixpoint into ` +
        `it (${interpreter.command} -m pip install <your Fixpoint checkout or wheel>) or set "fixpoint.python" ` +
        'to an interpreter that has it.';
    default:
      return `Fixpoint: ${who} failed to load the language server (${result.detail}). Reinstall Fixpoint into ` +
        'it or set "fixpoint.python" to an interpreter that has it.';
  }
}

// ------------------------------------------------------------------------------------- choosing

export type ProbeFailure = { interpreter: Interpreter; result: Exclude<ProbeResult, { ok: true }> };

export type Choice =
  | { ok: true; interpreter: Interpreter; result: Extract<ProbeResult, { ok: true }>; passedOver: ProbeFailure[] }
  | { ok: false; failures: ProbeFailure[] };

/**
 * The first candidate that can import the server, probed one after another (a later one is probed
 * only when the earlier ones cannot start it); every one passed over is returned with its reason.
 */
export async function chooseInterpreter(candidates: Interpreter[],
  check: (interpreter: Interpreter) => Promise<ProbeResult>): Promise<Choice> {
  const failures: ProbeFailure[] = [];
  for (const interpreter of candidates) {
    const result = await check(interpreter);
    if (result.ok) return { ok: true, interpreter, result, passedOver: failures };
    failures.push({ interpreter, result });
  }
  return { ok: false, failures };
}

/** One line of the log for a candidate passed over. */
export function passedOverNote(failure: ProbeFailure): string {
  return `"${failure.interpreter.command}" (${failure.interpreter.origin}) passed over: ${shortReason(failure.result)}`;
}

function shortReason(result: ProbeFailure['result']): string {
  switch (result.reason) {
    case 'not-found': return 'not found';
    case 'no-package': return `no Fixpoint (${result.detail})`;
    default: return `failed (${result.detail})`;
  }
}

/**
 * The one message when no candidate can start the server: a single candidate's own message, else each
 * one tried with its reason, and what to do.
 */
export function noServerMessage(failures: ProbeFailure[]): string {
  if (failures.length === 1) return problemMessage(failures[0].interpreter, failures[0].result);
  const tried = failures.map((f) => `"${f.interpreter.command}" (${f.interpreter.origin}): ${shortReason(f.result)}`).join('; ');
  const first = failures[0]?.interpreter.command ?? 'python3';
  return `Fixpoint: no Python interpreter here has Fixpoint's language server. Tried ${tried}. Install Fixpoint ` +
    `into one (${first} -m pip install <your Fixpoint checkout or wheel>), select an interpreter that has it, ` +
    'or set "fixpoint.python" to one.';
}

export interface ProblemAction {
  label: string;
  command: string;
  args: unknown[];
}

/**
 * The buttons of the "cannot start" message. "Select Interpreter" is the Python extension's picker when
 * its choice counts (it is installed and fixpoint.python does not override it), else Fixpoint's own
 * (a file dialog that sets fixpoint.python). "Open Setting" opens fixpoint.python in the Settings editor.
 */
export function problemActions(options: { pythonExtension: boolean; settingUsed: boolean }): ProblemAction[] {
  const select = options.pythonExtension && !options.settingUsed
    ? { label: 'Select Interpreter', command: 'python.setInterpreter', args: [] }
    : { label: 'Select Interpreter...', command: 'fixpoint.client.selectInterpreter', args: [] };
  return [
    select,
    { label: 'Open Setting', command: 'workbench.action.openSettings', args: ['fixpoint.python'] },
    { label: 'Show Log', command: 'fixpoint.client.showOutput', args: [] },
  ];
}
