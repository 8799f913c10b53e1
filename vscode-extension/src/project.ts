// What the client needs from fixpoint.toml without a TOML library: the default target, the [board]
// (a real board is one more flash-and-verify target), the model and params paths (defaults of the
// quantize command) and [flash] serial/probe. A small reader for `key = value` lines under `[table]`
// headers; anything it does not understand is skipped (the server reports bad values, not the client).
// Pure: no vscode import, unit-tested with node --test.

export type TomlValue = string | number | boolean;
export type TomlTables = Map<string, Map<string, TomlValue>>;

export interface BoardInfo {
  name: string;
  core?: string;
}

export interface ProjectInfo {
  target?: string;
  model?: string;
  params?: string;
  generated?: string;
  board?: BoardInfo;
  flash: { backend?: string; serial?: string; probe?: string };
}

/** `[table]` -> key -> value for simple key/value TOML ("" is the root table). */
export function readTomlTables(text: string): TomlTables {
  const tables: TomlTables = new Map([['', new Map()]]);
  let current = tables.get('')!;
  for (const raw of text.split(/\r?\n/)) {
    const line = stripComment(raw).trim();
    if (!line) continue;
    const header = /^\[\s*([^\[\]]+?)\s*\]$/.exec(line);
    if (header) {
      const name = header[1].split('.').map((p) => unquote(p.trim())).join('.');
      current = tables.get(name) ?? new Map();
      tables.set(name, current);
      continue;
    }
    const pair = /^("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=\s*(.+)$/.exec(line);
    if (!pair) continue;
    const value = parseValue(pair[2].trim());
    if (value !== undefined) current.set(unquote(pair[1]), value);
  }
  return tables;
}

export function parseProject(text: string): ProjectInfo {
  const tables = readTomlTables(text);
  const root = tables.get('')!;
  const str = (table: Map<string, TomlValue> | undefined, key: string): string | undefined => {
    const v = table?.get(key);
    return typeof v === 'string' ? v : undefined;
  };
  const boardTable = tables.get('board');
  const flash = tables.get('flash');
  return {
    target: str(root, 'target'),
    model: str(root, 'model'),
    params: str(root, 'params'),
    generated: str(root, 'generated'),
    board: boardTable ? { name: str(boardTable, 'name') || 'board', core: str(boardTable, 'core') } : undefined,
    flash: { backend: str(flash, 'backend'), serial: str(flash, 'serial'), probe: str(flash, 'probe') },
  };
}

function stripComment(line: string): string {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === '\\' && quote === '"') i++;
      else if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
    } else if (ch === '#') {
      return line.slice(0, i);
    }
  }
  return line;
}

function unquote(s: string): string {
  if (s.length >= 2 && (s[0] === '"' || s[0] === "'") && s[s.length - 1] === s[0]) return s.slice(1, -1);
  return s;
}

function parseValue(v: string): TomlValue | undefined {
  if (/^"(?:[^"\\]|\\.)*"$/.test(v)) {
    return v.slice(1, -1).replace(/\\(["\\nt])/g, (_, c: string) => ({ n: '\n', t: '\t' } as Record<string, string>)[c] ?? c);
  }
  if (/^'[^']*'$/.test(v)) return v.slice(1, -1);
  if (v === 'true' || v === 'false') return v === 'true';
  const num = v.replace(/_/g, '');
  if (/^[+-]?(0x[0-9a-fA-F]+|0o[0-7]+|0b[01]+)$/.test(num)) return Number(num.replace(/^\+/, ''));
  if (/^[+-]?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(num)) return Number(num);
  return undefined; // arrays, inline tables, dates: not needed by the client
}

// -------------------------------------------------------------------------------- targets

export type TargetKind = 'host' | 'emulator' | 'board';

export interface TargetChoice {
  name: string;
  kind: TargetKind;
  description: string;
  /** fixpoint.toml's (or the setting's) target. */
  isDefault: boolean;
}

/** The built-in targets of `fixpoint flash-verify` (quantcore/targets/target.py). */
export const BUILTIN_TARGETS: ReadonlyArray<{ name: string; kind: TargetKind; description: string }> = [
  { name: 'qemu-m4', kind: 'emulator', description: 'QEMU mps2-an386, Cortex-M4 (DSP)' },
  { name: 'qemu-m7', kind: 'emulator', description: 'QEMU mps2-an500, Cortex-M7 (DSP)' },
  { name: 'qemu-m55', kind: 'emulator', description: 'QEMU mps3-an547, Cortex-M55 (MVE)' },
  { name: 'host', kind: 'host', description: 'this machine: gcc and the pure-C CMSIS-NN kernels' },
];

/**
 * The flash-and-verify choices: the project's board (when fixpoint.toml has [board]) and the built-in
 * targets, the default one first. `preferred` (the fixpoint.target setting) wins over fixpoint.toml's.
 */
export function targetChoices(project: ProjectInfo | undefined, preferred?: string): TargetChoice[] {
  const wanted = preferred || project?.target || 'host';
  const choices: TargetChoice[] = [];
  if (project?.board) {
    const b = project.board;
    const parts = [b.core, project.flash.backend && `flash: ${project.flash.backend}`,
      project.flash.probe && `probe ${project.flash.probe}`, project.flash.serial && `serial ${project.flash.serial}`];
    choices.push({
      name: b.name,
      kind: 'board',
      description: `the project's board (${parts.filter(Boolean).join(', ') || "fixpoint.toml's [board]"})`,
      isDefault: false,
    });
  }
  for (const t of BUILTIN_TARGETS) choices.push({ ...t, isDefault: false });
  let index = choices.findIndex((c) => c.name === wanted || (wanted === 'board' && c.kind === 'board'));
  if (index < 0) {
    // A name fixpoint.toml knows but the client does not (a newer CLI): offer it as it is.
    choices.push({ name: wanted, kind: 'board', description: "fixpoint.toml's target", isDefault: false });
    index = choices.length - 1;
  }
  const [chosen] = choices.splice(index, 1);
  chosen.isDefault = true;
  return [chosen, ...choices];
}
