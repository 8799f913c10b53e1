import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import {
  barChart, bytes, contentSecurityPolicy, escapeHtml, firstMismatchIndex, niceCeil, parseReport, renderReport, summaryLine,
  VerificationReport,
} from '../../src/report/render';

// Real reports: `fixpoint flash-verify --json --target qemu-m4` and `fixpoint evaluate --json` on the
// server tests' firmware tree (tests/server/firmware_tree.py).
const FIXTURES = path.resolve(__dirname, '../../../test/unit/fixtures');
const load = (name: string) => JSON.parse(fs.readFileSync(path.join(FIXTURES, name), 'utf8'));
const OPTS = { nonce: 'n0nce', cspSource: 'vscode-webview://x' };

function failing(): Record<string, unknown> {
  const r = load('verify-pass.json');
  r.verdict = 'fail';
  r.layers[3].mismatched_bytes = 17;
  r.layers[3].first_mismatch = { case: 0, channel: 2, index: [0, 1, 1, 2], expected: -12, actual: -11 };
  r.layers[9].mismatched_bytes = 3;
  r.mismatched_bytes_total = 20;
  r.ram_bytes = 5_000_000; // over the 4 MiB budget
  return r;
}

test('parse: lastReport result, kind, tolerant of missing fields', () => {
  const r = parseReport({ ok: true, report: { kind: 'verification', ...load('verify-pass.json') } });
  assert.ok(!(r instanceof Error));
  assert.equal(r.kind, 'verification');
  assert.equal(r.layers.length, 16);
  assert.equal((r as VerificationReport).layers[7].float_sqnr_db, null, 'pad has no float metric');
  const e = parseReport({ ok: true, report: { kind: 'evaluation', ...load('evaluation.json') } });
  assert.ok(!(e instanceof Error) && e.kind === 'evaluation' && e.layers.length === 13);
  assert.ok(parseReport({ ok: false, report: null }) instanceof Error);
  assert.ok(parseReport({ report: { kind: 'verification' } }) instanceof Error);
  const sparse = parseReport({ kind: 'verification', layers: [{ name: 'a' }, 'junk', { name: 'b', mismatched_bytes: 2 }] });
  assert.ok(!(sparse instanceof Error) && sparse.layers.length === 2);
});

test('a passing verification: verdict, table, chart, memory bars, strict CSP', () => {
  const r = parseReport({ kind: 'verification', ...load('verify-pass.json') });
  const html = renderReport(r as VerificationReport, OPTS);
  assert.match(html, /<span class="badge pass">PASS<\/span>/);
  assert.equal((html.match(/<tr class=/g) ?? []).length, 16);
  for (const name of ['conv1', 'pool1', 'softmax']) assert.ok(html.includes(`<td>${name}</td>`), name);
  assert.equal((html.match(/<g class="bar /g) ?? []).length, 16);
  assert.match(html, /float vs int8 SQNR \(dB\)/);
  assert.match(html, /31\.8 KiB of 4\.00 MiB \(0\.8%\)/);
  assert.ok(!html.includes('first mismatch</span>'));
  assert.ok(!/<script/i.test(html), 'no script');
  assert.ok(!/https?:\/\/(?!www\.w3\.org\/2000\/svg)/.test(html), 'no external URL');
  assert.match(html, /content="default-src &#39;none&#39;;[^"]*style-src &#39;nonce-n0nce&#39;; script-src &#39;none&#39;/);
  assert.match(html, /<style nonce="n0nce">/);
  assert.equal(summaryLine(r as VerificationReport), 'Flash and verify on qemu-m4: PASS - 16/16 layers bit-exact');
});

test('a failing verification highlights the first mismatching layer', () => {
  const r = parseReport(failing()) as VerificationReport;
  assert.equal(firstMismatchIndex(r), 3);
  const html = renderReport(r, OPTS);
  assert.match(html, /<span class="badge fail">FAIL<\/span>/);
  assert.match(html, /<tr class="first"><td class="num">3<\/td><td>pwconv <span class="tag">first mismatch<\/span>/);
  assert.match(html, /<tr class="mismatch"><td class="num">9<\/td><td>conv3<\/td>/);
  assert.match(html, /case 0, channel 2, index \[0, 1, 1, 2\]: expected -12, got -11/);
  assert.match(html, /<g class="bar first"><title>pwconv: float vs int8 SQNR 17\.9 dB; 17 of 288 bytes differ/);
  assert.match(html, /<g class="marker">.*first mismatch<\/text><\/g>/);
  assert.match(html, /<div class="mem over">.*RAM.*over budget/);
  assert.equal(summaryLine(r), 'Flash and verify on qemu-m4: FAIL - 2 of 16 layers differ, first: pwconv (17 bytes)');
});

test('without float metrics the chart shows the mismatched share per layer', () => {
  const raw = failing();
  for (const l of raw.layers as Array<Record<string, unknown>>) delete l.float_sqnr_db;
  const html = renderReport(parseReport(raw) as VerificationReport, OPTS);
  assert.match(html, /mismatched bytes \(%\)/);
  assert.match(html, /pwconv: 5\.9% mismatched/);
});

test('an evaluation: SQNR per layer, the worst one marked, infinities', () => {
  const raw = load('evaluation.json');
  raw.layers[1].sqnr_db = null;
  raw.layers[1].nonfinite = { sqnr_db: 'inf' };
  const r = parseReport({ kind: 'evaluation', ...raw });
  const html = renderReport(r as never, OPTS);
  assert.match(html, /<h1>Evaluation: float vs int8<\/h1>/);
  assert.match(html, /<tr class="worst"><td class="num">9<\/td><td>pool3 <span class="tag">worst<\/span>/);
  assert.match(html, /<g class="bar ok exact"><title>pool1 \(max_pool\): exact \(infinite SQNR\)/);
  assert.match(html, /agreement<\/dt><dd>100\.0%/);
  assert.equal(summaryLine(r as never), 'Evaluation: 13 layers, agreement 100.0%, output SQNR 31.1 dB, worst layer pool3');
});

test('escaping: names from the report cannot inject markup', () => {
  const html = renderReport(parseReport({ kind: 'verification', target: '<img src=x>', verdict: 'pass', layers: [{ name: '<script>alert(1)</script>', mismatched_bytes: 0, bytes: 4 }] }) as never, OPTS);
  assert.ok(!html.includes('<script>'));
  assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  assert.ok(!html.includes('<img'));
  assert.equal(escapeHtml(`a"b'c&`), 'a&quot;b&#39;c&amp;');
});

test('helpers: nice axis maxima, byte sizes, chart geometry', () => {
  assert.deepEqual([0.7, 1, 13, 23.1, 47, 99, 101].map(niceCeil), [1, 1, 20, 50, 50, 100, 200]);
  assert.deepEqual([512, 2048, 32528, 4194304].map(bytes), ['512 B', '2.0 KiB', '31.8 KiB', '4.00 MiB']);
  const svg = barChart([{ label: 'a', value: 5, cls: 'ok', title: 'a' }, { label: 'b', value: -3, cls: 'ok', title: 'b' }, { label: 'c', value: null, cls: 'ok', title: 'c' }], 'dB');
  assert.match(svg, /^<svg class="chart"/);
  assert.equal((svg.match(/<rect /g) ?? []).length, 2);
  assert.match(svg, /<circle /);
  assert.match(contentSecurityPolicy(OPTS), /^default-src 'none'/);
});
