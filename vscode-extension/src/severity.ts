// Per-rule severities from the settings (fixpoint.severity.<rule>): sent to the server in the
// initializationOptions, and applied to the diagnostics as they arrive so they take effect with any
// server version. Pure: no vscode import (severities are VS Code's numeric DiagnosticSeverity).

export const LEVELS = ['default', 'error', 'warning', 'info', 'hint', 'off'] as const;
export type Level = (typeof LEVELS)[number];
export type Override = Exclude<Level, 'default'>;

/** The server's rule codes with their default severity (fixpoint check --list-rules). */
export const RULES: ReadonlyArray<{ code: string; severity: Override; summary: string }> = [
  { code: 'unscaled-bias', severity: 'error', summary: 'a bias passed to an s8 kernel that is not int32, or not round(b / (s_in * s_w[c])) of its layer' },
  { code: 'misaligned-array', severity: 'warning', summary: 'weight/bias/arena arrays without the alignment attribute, or not padded to N bytes' },
  { code: 'wrong-zero-point', severity: 'error', summary: 'a zero point or offset inconsistent with the int8 scheme (e.g. the uint8 habit 128)' },
  { code: 'kernel-opt-level', severity: 'warning', summary: 'build flags the policy forbids on CMSIS-NN or generated sources (-O3, -Ofast, -O0, ...)' },
  { code: 'missing-cmsis-nn', severity: 'error', summary: 'CMSIS-NN kernels called but the build neither links nor compiles CMSIS-NN' },
  { code: 'stale-generated', severity: 'warning', summary: 'generated sources out of date with their JSON/model, or edited by hand' },
  { code: 'suspicious-scale', severity: 'warning', summary: 'scales that signal failed calibration; integers that do not follow from the scales; a JSON that fails its schema' },
  { code: 'project-settings', severity: 'warning', summary: 'a fixpoint.toml value that cannot be used' },
  { code: 'skipped-file', severity: 'warning', summary: 'a file or folder not read: special, outside the workspace, too large, too deep or unreadable' },
];

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
