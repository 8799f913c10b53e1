// Which Python starts the language server, and whether it can: the fixpoint.python setting, else the
// workspace's virtualenv (.venv, venv), else python3 from PATH. In an untrusted workspace only the
// user's own setting and PATH count, and never an interpreter inside the workspace.
// No vscode import: unit-tested with node --test.

import { execFile } from 'child_process';
import * as path from 'path';

export type InterpreterSource = 'setting' | 'venv' | 'path';

export interface Interpreter {
  command: string;
  source: InterpreterSource;
  /** For messages: where the interpreter came from. */
  origin: string;
}

export interface ResolveInputs {
  /** The fixpoint.python setting (the user-level value only, in an untrusted workspace). */
  configured?: string;
  /** The workspace folders' paths. */
  folders: string[];
  trusted: boolean;
  platform?: NodeJS.Platform;
  home?: string;
  exists: (file: string) => boolean;
}

export interface Resolution {
  interpreter: Interpreter;
  /** Why a configured or workspace interpreter was passed over (shown in the log). */
  notes: string[];
}

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

export function resolveInterpreter(inputs: ResolveInputs): Resolution {
  const platform = inputs.platform ?? process.platform;
  const notes: string[] = [];
  const configured = inputs.configured?.trim();
  if (configured) {
    const command = expandPath(configured, inputs.folders[0], inputs.home);
    const looksLikePath = command.includes('/') || command.includes('\\');
    const absolute = looksLikePath && !path.isAbsolute(command) && inputs.folders[0]
      ? path.resolve(inputs.folders[0], command) : command;
    const inWorkspace = looksLikePath && inputs.folders.some((f) => isInside(absolute, f));
    if (!inputs.trusted && inWorkspace) {
      notes.push(`fixpoint.python (${configured}) lies inside the untrusted workspace: not started`);
    } else {
      return { interpreter: { command: absolute, source: 'setting', origin: 'the fixpoint.python setting' }, notes };
    }
  }
  if (inputs.trusted) {
    for (const folder of inputs.folders) {
      for (const dir of VENV_DIRS) {
        const candidate = venvPython(path.join(folder, dir), platform);
        if (inputs.exists(candidate)) {
          return { interpreter: { command: candidate, source: 'venv', origin: `the workspace's ${dir}` }, notes };
        }
      }
    }
  } else if (inputs.folders.some((f) => VENV_DIRS.some((d) => inputs.exists(venvPython(path.join(f, d), platform))))) {
    notes.push("the workspace's virtualenv is not used in an untrusted workspace");
  }
  const fallback = platform === 'win32' ? 'python' : 'python3';
  return { interpreter: { command: fallback, source: 'path', origin: `${fallback} from PATH` }, notes };
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
      return `Fixpoint: ${who} failed to load the language server: ${result.detail}`;
  }
}
