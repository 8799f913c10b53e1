// The report view's HTML, rendered from the server's fixpoint.lastReport JSON: a summary, memory use
// against the budget, an SVG chart of SQNR (or mismatched bytes) per layer, and the per-layer table with
// the first mismatching layer highlighted. Everything is drawn here as markup - no script, no external
// resource, nothing from a CDN - so the webview runs under a CSP without 'script-src' at all.
// Pure: no vscode import, unit-tested with node --test.

export interface FirstMismatch {
  case?: number;
  channel?: number;
  index?: number[];
  expected?: number;
  actual?: number;
}

export interface VerifyLayer {
  name: string;
  bytes?: number;
  mismatched_bytes: number;
  first_mismatch?: FirstMismatch;
  float_sqnr_db?: number | null;
}

export interface VerificationReport {
  kind: 'verification';
  target?: string;
  verdict?: string;
  channel?: string;
  cases?: number;
  inputs?: string;
  layers: VerifyLayer[];
  mismatched_bytes_total?: number;
  output_mismatched_bytes?: number;
  flash_bytes?: number | null;
  ram_bytes?: number | null;
  arena_bytes?: number | null;
  scratch_bytes?: number | null;
  flash_budget?: number | null;
  ram_budget?: number | null;
  run_seconds?: number;
}

export interface EvalLayer {
  name: string;
  op?: string;
  sqnr_db: number | null;
  psnr_db?: number | null;
  cosine?: number | null;
  rel_l2?: number | null;
  max_abs?: number | null;
  nonfinite?: Record<string, string>;
}

export interface EvaluationReport {
  kind: 'evaluation';
  model?: string;
  params_file?: string;
  samples?: number;
  top1_float?: number | null;
  top1_int8?: number | null;
  top1_drop_points?: number | null;
  agreement?: number | null;
  output_sqnr_db?: number | null;
  worst_layer?: string | null;
  nonfinite?: Record<string, string>;
  layers: EvalLayer[];
}

export type Report = VerificationReport | EvaluationReport;

export interface RenderOptions {
  /** The nonce of the one <style> element (the CSP allows only it). */
  nonce: string;
  /** webview.cspSource (images from the extension, if any). */
  cspSource: string;
  /** Shown under the title, e.g. when the report was received. */
  subtitle?: string;
}

// ------------------------------------------------------------------------------ reading the JSON

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * The report inside a fixpoint.lastReport result ({ok, report}) or the report itself; an Error's message
 * when the JSON is not a report. Unknown fields are ignored, missing ones shown as a dash.
 */
export function parseReport(value: unknown): Report | Error {
  let report = value;
  if (isObj(value) && 'report' in value && !('layers' in value)) report = value.report;
  if (!isObj(report)) return new Error('no report yet: run "Fixpoint: Flash and Verify" or "Fixpoint: Quantize Model..."');
  if (!Array.isArray(report.layers)) return new Error('the server\'s report has no "layers"');
  const kind = report.kind === 'evaluation' || (report.kind === undefined && 'output_sqnr_db' in report) ? 'evaluation' : 'verification';
  const layers = report.layers.filter(isObj);
  if (kind === 'evaluation') {
    return {
      kind,
      model: str(report.model), params_file: str(report.params_file), samples: num(report.samples) ?? undefined,
      top1_float: num(report.top1_float), top1_int8: num(report.top1_int8), top1_drop_points: num(report.top1_drop_points),
      agreement: num(report.agreement), output_sqnr_db: num(report.output_sqnr_db), worst_layer: str(report.worst_layer) ?? null,
      nonfinite: isObj(report.nonfinite) ? (report.nonfinite as Record<string, string>) : undefined,
      layers: layers.map((l) => ({
        name: String(l.name ?? '?'), op: str(l.op), sqnr_db: num(l.sqnr_db), psnr_db: num(l.psnr_db), cosine: num(l.cosine),
        rel_l2: num(l.rel_l2), max_abs: num(l.max_abs),
        nonfinite: isObj(l.nonfinite) ? (l.nonfinite as Record<string, string>) : undefined,
      })),
    };
  }
  return {
    kind,
    target: str(report.target), verdict: str(report.verdict), channel: str(report.channel),
    cases: num(report.cases) ?? undefined, inputs: str(report.inputs),
    mismatched_bytes_total: num(report.mismatched_bytes_total) ?? undefined,
    output_mismatched_bytes: num(report.output_mismatched_bytes) ?? undefined,
    flash_bytes: num(report.flash_bytes), ram_bytes: num(report.ram_bytes), arena_bytes: num(report.arena_bytes),
    scratch_bytes: num(report.scratch_bytes), flash_budget: num(report.flash_budget), ram_budget: num(report.ram_budget),
    run_seconds: num(report.run_seconds) ?? undefined,
    layers: layers.map((l) => ({
      name: String(l.name ?? '?'), bytes: num(l.bytes) ?? undefined, mismatched_bytes: num(l.mismatched_bytes) ?? 0,
      first_mismatch: isObj(l.first_mismatch) ? (l.first_mismatch as FirstMismatch) : undefined,
      float_sqnr_db: num(l.float_sqnr_db),
    })),
  };
}

/** Index of the first layer whose bytes differ from the reference (-1: none). */
export function firstMismatchIndex(report: VerificationReport): number {
  return report.layers.findIndex((l) => l.mismatched_bytes > 0);
}

/** One line for notifications and the status bar tooltip. */
export function summaryLine(report: Report): string {
  if (report.kind === 'evaluation') {
    const parts = [`${report.layers.length} layers`];
    if (report.agreement != null) parts.push(`agreement ${pct(report.agreement)}`);
    if (report.output_sqnr_db != null) parts.push(`output SQNR ${db(report.output_sqnr_db)}`);
    if (report.worst_layer) parts.push(`worst layer ${report.worst_layer}`);
    return `Evaluation: ${parts.join(', ')}`;
  }
  const verdict = (report.verdict ?? 'unknown').toUpperCase();
  const first = firstMismatchIndex(report);
  const differing = report.layers.filter((l) => l.mismatched_bytes > 0).length;
  const what = first < 0
    ? `${report.layers.length}/${report.layers.length} layers bit-exact`
    : `${differing} of ${report.layers.length} layers differ, first: ${report.layers[first].name} (${report.layers[first].mismatched_bytes} bytes)`;
  return `Flash and verify on ${report.target ?? '?'}: ${verdict} - ${what}`;
}

// ------------------------------------------------------------------------------------ formatting

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

export function bytes(n: number | null | undefined): string {
  if (n == null) return '-';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}

const db = (v: number | null | undefined): string => (v == null ? '-' : `${v.toFixed(1)} dB`);
const pct = (v: number | null | undefined): string => (v == null ? '-' : `${(v * 100).toFixed(1)}%`);
const fixed = (v: number | null | undefined, digits: number): string => (v == null ? '-' : v.toFixed(digits));
const sci = (v: number | null | undefined): string => (v == null ? '-' : Math.abs(v) < 1e-3 && v !== 0 ? v.toExponential(2) : v.toFixed(4));

/** A finite SQNR, "inf" for an exact layer (null + nonfinite marker), or null when not measured. */
function sqnrOf(layer: VerifyLayer | EvalLayer): number | 'inf' | null {
  if ('sqnr_db' in layer) {
    if (layer.sqnr_db != null) return layer.sqnr_db;
    return layer.nonfinite?.sqnr_db === 'inf' ? 'inf' : null;
  }
  return layer.float_sqnr_db ?? null;
}

// ------------------------------------------------------------------------------------ the chart

interface Bar {
  label: string;
  value: number | 'inf' | null;
  cls: string;
  title: string;
  marker?: string;
}

/** Round up to 1, 2 or 5 times a power of ten. */
export function niceCeil(v: number): number {
  if (v <= 0) return 0;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v - 1e-9) return m * p;
  return 10 * p;
}

/** An SVG bar chart: one bar per layer, a labelled y axis from min(0, lowest) to a round maximum. */
export function barChart(bars: Bar[], yLabel: string, options: { max?: number } = {}): string {
  const slot = 30, left = 56, top = 26, plotH = 200, bottom = 92;
  const width = left + Math.max(bars.length, 4) * slot + 16;
  const height = top + plotH + bottom;
  const finite = bars.map((b) => b.value).filter((v): v is number => typeof v === 'number');
  const yMax = options.max ?? niceCeil(Math.max(10, ...finite) * 1.05);
  const yMin = Math.min(0, ...finite.map((v) => -niceCeil(-v)));
  const y = (v: number): number => top + plotH - ((v - yMin) / (yMax - yMin)) * plotH;
  const step = niceCeil((yMax - yMin) / 5);
  const out: string[] = [];
  out.push(`<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeHtml(yLabel)}">`);
  for (let t = Math.ceil(yMin / step) * step; t <= yMax + 1e-9; t += step) {
    const ty = y(t).toFixed(1);
    out.push(`<line class="grid" x1="${left}" x2="${width - 8}" y1="${ty}" y2="${ty}"/>`);
    out.push(`<text class="tick" x="${left - 6}" y="${ty}" text-anchor="end" dominant-baseline="middle">${escapeHtml(+t.toFixed(6))}</text>`);
  }
  out.push(`<text class="axis-label" transform="translate(14 ${top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(yLabel)}</text>`);
  bars.forEach((bar, i) => {
    const x = left + i * slot + 5, w = slot - 10, cx = x + w / 2;
    if (bar.value === null) {
      out.push(`<g class="bar na"><title>${escapeHtml(bar.title)}</title><circle cx="${cx}" cy="${y(0) - 4}" r="2.5"/></g>`);
    } else {
      const v = bar.value === 'inf' ? yMax : bar.value;
      const y0 = y(Math.max(0, Math.min(v, yMax))), y1 = y(Math.min(0, v));
      const h = Math.max(1, y1 - y0);
      out.push(`<g class="bar ${bar.cls}${bar.value === 'inf' ? ' exact' : ''}"><title>${escapeHtml(bar.title)}</title>` +
        `<rect x="${x}" y="${y0.toFixed(1)}" width="${w}" height="${h.toFixed(1)}" rx="2"/></g>`);
      if (bar.value === 'inf') out.push(`<text class="value" x="${cx}" y="${(y0 - 4).toFixed(1)}" text-anchor="middle">&#8734;</text>`);
    }
    if (bar.marker) {
      const my = top - 6;
      out.push(`<g class="marker"><path d="M${cx - 5} ${my - 8} L${cx + 5} ${my - 8} L${cx} ${my} Z"/>` +
        `<text x="${cx}" y="${my - 11}" text-anchor="${i > bars.length - 3 ? 'end' : 'middle'}">${escapeHtml(bar.marker)}</text></g>`);
    }
    out.push(`<text class="xlabel" transform="translate(${cx + 3} ${top + plotH + 8}) rotate(-55)" text-anchor="end">${escapeHtml(bar.label)}</text>`);
  });
  out.push(`<line class="axis" x1="${left}" x2="${width - 8}" y1="${y(0).toFixed(1)}" y2="${y(0).toFixed(1)}"/>`);
  out.push(`<line class="axis" x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}"/>`);
  out.push('</svg>');
  return out.join('');
}

function verificationBars(report: VerificationReport): { bars: Bar[]; label: string; max?: number } {
  const first = firstMismatchIndex(report);
  const haveSqnr = report.layers.some((l) => l.float_sqnr_db != null);
  const bars = report.layers.map((l, i): Bar => {
    const mismatch = l.mismatched_bytes > 0;
    const cls = i === first ? 'first' : mismatch ? 'mismatch' : 'ok';
    const share = l.bytes ? (100 * l.mismatched_bytes) / l.bytes : 0;
    const status = mismatch ? `${l.mismatched_bytes} of ${l.bytes ?? '?'} bytes differ from the reference` : 'bit-exact with the reference';
    const value = haveSqnr ? sqnrOf(l) : share;
    const shown = haveSqnr ? (value === null ? 'no float metric' : `float vs int8 SQNR ${db(value as number)}`) : `${share.toFixed(1)}% mismatched`;
    return { label: l.name, value, cls, title: `${l.name}: ${shown}; ${status}`, marker: i === first ? 'first mismatch' : undefined };
  });
  return haveSqnr
    ? { bars, label: 'float vs int8 SQNR (dB)' }
    : { bars, label: 'mismatched bytes (%)', max: 100 };
}

function evaluationBars(report: EvaluationReport): { bars: Bar[]; label: string } {
  const bars = report.layers.map((l): Bar => {
    const value = sqnrOf(l);
    const worst = l.name === report.worst_layer;
    const shown = value === 'inf' ? 'exact (infinite SQNR)' : value === null ? 'no SQNR' : `SQNR ${db(value)}`;
    return { label: l.name, value, cls: worst ? 'worst' : 'ok', title: `${l.name}${l.op ? ` (${l.op})` : ''}: ${shown}`, marker: worst ? 'worst layer' : undefined };
  });
  return { bars, label: 'SQNR float vs int8 (dB)' };
}

// ----------------------------------------------------------------------------------- the memory

function memoryBar(label: string, used: number | null | undefined, budget: number | null | undefined, parts: Array<[string, number | null | undefined]> = []): string {
  if (used == null) return '';
  const w = 420, h = 18;
  const scale = budget && budget > 0 ? Math.max(budget, used) : used || 1;
  const over = budget != null && used > budget;
  const share = budget ? ` of ${bytes(budget)} (${((100 * used) / budget).toFixed(1)}%)` : ' (no budget)';
  let segments = '';
  let x = 0;
  for (const [name, size] of parts) {
    if (!size) continue;
    const sw = (size / scale) * w;
    segments += `<rect class="seg" x="${x.toFixed(1)}" y="3" width="${sw.toFixed(1)}" height="${h - 6}"><title>${escapeHtml(`${name}: ${bytes(size)}`)}</title></rect>`;
    x += sw;
  }
  const uw = Math.max(1, (used / scale) * w);
  const budgetLine = budget ? `<line class="budget" x1="${((budget / scale) * w).toFixed(1)}" x2="${((budget / scale) * w).toFixed(1)}" y1="0" y2="${h}"/>` : '';
  return `<div class="mem${over ? ' over' : ''}"><span class="mem-label">${escapeHtml(label)}</span>` +
    `<svg class="membar" xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img" aria-label="${escapeHtml(label)}">` +
    `<rect class="track" x="0" y="0" width="${w}" height="${h}" rx="3"/>` +
    `<rect class="used" x="0" y="0" width="${uw.toFixed(1)}" height="${h}" rx="3"><title>${escapeHtml(`${label}: ${bytes(used)}${share}`)}</title></rect>` +
    segments + budgetLine + '</svg>' +
    `<span class="mem-text">${escapeHtml(bytes(used) + share)}${over ? ' - over budget' : ''}</span></div>`;
}

// ------------------------------------------------------------------------------------ the page

function verificationBody(r: VerificationReport): string {
  const first = firstMismatchIndex(r);
  const pass = r.verdict === 'pass';
  const summary: Array<[string, string]> = [
    ['target', r.target ?? '-'],
    ['verdict', (r.verdict ?? '-').toUpperCase()],
    ['mismatched bytes', String(r.mismatched_bytes_total ?? '-')],
    ['first mismatching layer', first < 0 ? 'none' : r.layers[first].name],
    ['cases', String(r.cases ?? '-')],
    ['inputs', r.inputs ?? '-'],
    ['channel', r.channel ?? '-'],
    ['run time', r.run_seconds != null ? `${r.run_seconds.toFixed(2)} s` : '-'],
  ];
  const chart = verificationBars(r);
  const rows = r.layers.map((l, i) => {
    const cls = i === first ? 'first' : l.mismatched_bytes > 0 ? 'mismatch' : '';
    const fm = l.first_mismatch;
    const where = fm ? `case ${fm.case ?? '?'}, channel ${fm.channel ?? '?'}, index [${(fm.index ?? []).join(', ')}]: expected ${fm.expected ?? '?'}, got ${fm.actual ?? '?'}` : '';
    return `<tr class="${cls}"><td class="num">${i}</td><td>${escapeHtml(l.name)}${i === first ? ' <span class="tag">first mismatch</span>' : ''}</td>` +
      `<td class="num">${l.bytes ?? '-'}</td><td class="num">${l.mismatched_bytes}</td>` +
      `<td>${l.mismatched_bytes > 0 ? '<span class="bad">differs</span>' : '<span class="good">bit-exact</span>'}</td>` +
      `<td>${escapeHtml(where)}</td><td class="num">${escapeHtml(l.float_sqnr_db == null ? '-' : db(l.float_sqnr_db))}</td></tr>`;
  });
  return `<h1>Flash and verify <span class="badge ${pass ? 'pass' : 'fail'}">${escapeHtml((r.verdict ?? '?').toUpperCase())}</span></h1>` +
    definitionList(summary) +
    '<h2>Memory</h2>' +
    memoryBar('Flash', r.flash_bytes, r.flash_budget) +
    memoryBar('RAM', r.ram_bytes, r.ram_budget, [['arena', r.arena_bytes], ['scratch', r.scratch_bytes]]) +
    `<p class="note">arena ${escapeHtml(bytes(r.arena_bytes))}, scratch ${escapeHtml(bytes(r.scratch_bytes))} (shaded inside RAM); the line marks the budget.</p>` +
    `<h2>Per layer</h2>${legend(['ok', 'bit-exact'], ['mismatch', 'differs'], ['first', 'first mismatching layer'])}` +
    `<div class="chart-wrap">${barChart(chart.bars, chart.label, { max: chart.max })}</div>` +
    '<table><thead><tr><th>#</th><th>layer</th><th>bytes</th><th>mismatched</th><th>verdict</th><th>first mismatch</th><th>float SQNR</th></tr></thead>' +
    `<tbody>${rows.join('')}</tbody></table>`;
}

function evaluationBody(r: EvaluationReport): string {
  const summary: Array<[string, string]> = [
    ['model', r.model ?? '-'],
    ['parameters', r.params_file ?? '-'],
    ['samples', String(r.samples ?? '-')],
    ['top-1 float / int8', `${pct(r.top1_float)} / ${pct(r.top1_int8)}`],
    ['agreement', pct(r.agreement)],
    ['output SQNR', r.output_sqnr_db == null && r.nonfinite?.output_sqnr_db === 'inf' ? 'exact' : db(r.output_sqnr_db)],
    ['worst layer', r.worst_layer ?? '-'],
  ];
  const chart = evaluationBars(r);
  const rows = r.layers.map((l, i) => {
    const s = sqnrOf(l);
    const worst = l.name === r.worst_layer;
    return `<tr class="${worst ? 'worst' : ''}"><td class="num">${i}</td><td>${escapeHtml(l.name)}${worst ? ' <span class="tag">worst</span>' : ''}</td>` +
      `<td>${escapeHtml(l.op ?? '')}</td><td class="num">${s === 'inf' ? '&#8734;' : escapeHtml(s == null ? '-' : db(s))}</td>` +
      `<td class="num">${escapeHtml(l.psnr_db == null ? '-' : db(l.psnr_db))}</td><td class="num">${escapeHtml(fixed(l.cosine, 5))}</td>` +
      `<td class="num">${escapeHtml(sci(l.rel_l2))}</td><td class="num">${escapeHtml(sci(l.max_abs))}</td></tr>`;
  });
  return `<h1>Evaluation: float vs int8</h1>${definitionList(summary)}` +
    `<h2>Per layer</h2>${legend(['ok', 'layer'], ['worst', 'lowest SQNR'])}` +
    `<div class="chart-wrap">${barChart(chart.bars, chart.label)}</div>` +
    '<table><thead><tr><th>#</th><th>layer</th><th>op</th><th>SQNR</th><th>PSNR</th><th>cosine</th><th>rel. L2</th><th>max abs</th></tr></thead>' +
    `<tbody>${rows.join('')}</tbody></table>`;
}

function definitionList(items: Array<[string, string]>): string {
  return `<dl class="summary">${items.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join('')}</dl>`;
}

function legend(...entries: Array<[string, string]>): string {
  return `<p class="legend">${entries.map(([cls, text]) => `<span class="swatch ${cls}"></span>${escapeHtml(text)}`).join(' ')}</p>`;
}

export const STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 16px 24px; }
h1 { font-size: 1.5em; font-weight: 600; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.subtitle, .note { color: var(--vscode-descriptionForeground); }
.badge { font-size: .7em; padding: 2px 8px; border-radius: 10px; vertical-align: middle; color: #fff; }
.badge.pass { background: var(--vscode-testing-iconPassed, #388a34); } .badge.fail { background: var(--vscode-testing-iconFailed, #c72e0f); }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dl.summary dt { color: var(--vscode-descriptionForeground); } dl.summary dd { margin: 0; }
.chart-wrap { overflow-x: auto; }
svg text { fill: var(--vscode-foreground); font-size: 11px; font-family: var(--vscode-font-family); }
.grid { stroke: var(--vscode-editorIndentGuide-background, #8884); stroke-width: 1; }
.axis { stroke: var(--vscode-foreground); stroke-width: 1; }
.bar.ok rect, .swatch.ok { fill: var(--vscode-charts-blue, #3794ff); background: var(--vscode-charts-blue, #3794ff); }
.bar.exact rect { fill-opacity: .45; }
.bar.mismatch rect, .swatch.mismatch { fill: var(--vscode-charts-orange, #d18616); background: var(--vscode-charts-orange, #d18616); }
.bar.first rect, .swatch.first { fill: var(--vscode-charts-red, #f14c4c); background: var(--vscode-charts-red, #f14c4c); }
.bar.first rect { stroke: var(--vscode-foreground); stroke-width: 2; }
.bar.worst rect, .swatch.worst { fill: var(--vscode-charts-orange, #d18616); background: var(--vscode-charts-orange, #d18616); }
.bar.na circle { fill: var(--vscode-descriptionForeground); }
.marker path { fill: var(--vscode-charts-red, #f14c4c); } .marker text { font-weight: 600; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; border-radius: 2px; }
.legend .swatch:first-child { margin-left: 0; }
.mem { display: flex; align-items: center; gap: 10px; margin: 6px 0; }
.mem-label { width: 48px; }
.membar .track { fill: var(--vscode-editorWidget-background, #8882); stroke: var(--vscode-editorWidget-border, #8886); }
.membar .used { fill: var(--vscode-charts-green, #89d185); } .mem.over .membar .used { fill: var(--vscode-charts-red, #f14c4c); }
.membar .seg { fill: var(--vscode-charts-purple, #b180d7); fill-opacity: .8; }
.membar .budget { stroke: var(--vscode-foreground); stroke-width: 2; stroke-dasharray: 3 2; }
.mem.over .mem-text { color: var(--vscode-errorForeground); font-weight: 600; }
table { border-collapse: collapse; margin-top: 8px; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--vscode-editorWidget-border, #8884); text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.mismatch td { background: var(--vscode-inputValidation-warningBackground, #d1861633); }
tr.first td { background: var(--vscode-inputValidation-errorBackground, #f14c4c33); font-weight: 600; }
tr.worst td { background: var(--vscode-inputValidation-warningBackground, #d1861633); }
.good, .bad, .tag { white-space: nowrap; }
.tag { font-size: .8em; padding: 0 6px; border-radius: 8px; border: 1px solid currentColor; }
.good { color: var(--vscode-testing-iconPassed, #388a34); } .bad { color: var(--vscode-errorForeground, #f14c4c); }
`;

/** The Content-Security-Policy of the report: no script, no network, only this page's nonce'd style. */
export function contentSecurityPolicy(options: RenderOptions): string {
  return `default-src 'none'; img-src ${options.cspSource} data:; style-src 'nonce-${options.nonce}'; script-src 'none'; ` +
    "frame-src 'none'; form-action 'none'; base-uri 'none'";
}

export function renderReport(report: Report | Error, options: RenderOptions): string {
  const body = report instanceof Error
    ? `<h1>Fixpoint report</h1><p class="note">${escapeHtml(report.message)}</p>`
    : report.kind === 'evaluation' ? evaluationBody(report) : verificationBody(report);
  const subtitle = options.subtitle ? `<p class="subtitle">${escapeHtml(options.subtitle)}</p>` : '';
  return '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">' +
    `<meta http-equiv="Content-Security-Policy" content="${escapeHtml(contentSecurityPolicy(options))}">` +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>Fixpoint report</title><style nonce="${escapeHtml(options.nonce)}">${STYLE}</style></head>` +
    `<body>${body}${subtitle}</body></html>`;
}
