// Per-rule severities from the settings (fixpoint.severity.<rule>): sent to the server in the
// initializationOptions, and applied to the diagnostics as they arrive so they take effect with any
// server version. Pure: no vscode import (severities are VS Code's numeric DiagnosticSeverity).

import GENERATED from './rules.json';

export const LEVELS = ['default', 'error', 'warning', 'info', 'hint', 'off'] as const;
export type Level = (typeof LEVELS)[number];
export type Override = Exclude<Level, 'default'>;

/** The server's rules with their default severity and summary (`fixpoint check --list-rules`), generated
 * into rules.json at build time by scripts/gen-rules.js; package.json's severity settings come from the
 * same run. */
export const RULES: ReadonlyArray<{ code: string; severity: Override; summary: string }> = GENERATED as Array<{
  code: string;
  severity: Override;
  summary: string;
}>;

/** VS Code's DiagnosticSeverity values. */
export const SEVERITY_VALUE: Record<Exclude<Override, 'off'>, number> = { error: 0, warning: 1, info: 2, hint: 3 };

/** The overrides the user set (anything but "default"), keyed by rule code; unknown values are ignored. */
export function severityOverrides(setting: unknown): Record<string, Override> {
  const out: Record<string, Override> = {};
  if (!setting || typeof setting !== 'object') return out;
  for (const rule of RULES) {
    const v = (setting as Record<string, unknown>)[rule.code];
    if (typeof v === 'string' && v !== 'default' && (LEVELS as readonly string[]).includes(v)) out[rule.code] = v as Override;
  }
  return out;
}

/** The severity a diagnostic of rule `code` is shown with: unchanged, another one, or null (hidden). */
export function applySeverity(code: string | undefined, severity: number, overrides: Record<string, Override>): number | null {
  const o = code === undefined ? undefined : overrides[code];
  if (o === undefined) return severity;
  if (o === 'off') return null;
  return SEVERITY_VALUE[o];
}
