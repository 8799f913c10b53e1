// Build step: the extension's copies of the server's rules, generated from the one place they are
// stated (server/fixpoint_server/findings.py's Code, printed by `fixpoint check --list-rules --format
// json`):
//   - src/rules.json: code, default severity and summary of each rule (src/severity.ts's table);
//   - package.json: one `fixpoint.severity.<code>` setting per rule, in the rules' order.
// Both are committed (the manifest must be, and a build without Python keeps working from them);
// tests/extension/test_rule_list.py runs `node scripts/gen-rules.js --check` to keep them current.
//
// The catalog comes from the Python with Fixpoint installed: $FIXPOINT_PYTHON, else the repository's
// .venv, else python3 on PATH. Outside the Fixpoint repository, or when none of them has Fixpoint, the
// committed src/rules.json is used (with a note). A file is written only when its content changes.
//
// Usage: node scripts/gen-rules.js [--check]   (--check: write nothing, exit 1 naming stale files)
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const EXT = path.join(__dirname, '..');
const REPO = path.join(EXT, '..');
const RULES_JSON = path.join(EXT, 'src', 'rules.json');
const PACKAGE_JSON = path.join(EXT, 'package.json');
const PREFIX = 'fixpoint.severity.';
const FIRST_ORDER = 10; // the settings' place in the Settings UI: after the general ones (0-6)
const LEVELS = ['default', 'error', 'warning', 'info', 'hint', 'off'];

/** The rules as the server prints them, or null when no Python with Fixpoint is at hand. */
function catalogFromServer() {
  if (!fs.existsSync(path.join(REPO, 'server', 'fixpoint_server', 'findings.py'))) return null;
  const venv = path.join(REPO, '.venv', 'bin', 'python');
  const python = process.env.FIXPOINT_PYTHON || (fs.existsSync(venv) ? venv : 'python3');
  const run = spawnSync(python, ['-m', 'quantcore.cli', 'check', '--list-rules', '--format', 'json'], {
    cwd: REPO,
    encoding: 'utf8',
    timeout: 120000,
  });
  if (run.status !== 0) {
    const why = run.error ? run.error.message : (run.stderr || '').trim().split('\n').pop();
    console.log(`gen-rules: ${python} could not list the rules (${why}); using the committed src/rules.json`);
    return null;
  }
  return JSON.parse(run.stdout);
}

/** What the extension keeps of each rule: no explanation (the diagnostics link to the server's). */
function rulesFile(catalog) {
  const rules = catalog.map((r) => ({ code: r.code, severity: r.severity, summary: r.summary }));
  for (const r of rules) {
    if (!/^[a-z0-9-]+$/.test(r.code) || !LEVELS.slice(1, 5).includes(r.severity) || !r.summary) {
      throw new Error(`gen-rules: a rule the extension cannot use: ${JSON.stringify(r)}`);
    }
  }
  return JSON.stringify(rules, null, 2) + '\n';
}

/** The `fixpoint.severity.<code>` setting of one rule. */
function setting(rule, index) {
  return {
    type: 'string',
    default: 'default',
    order: FIRST_ORDER + index,
    enum: LEVELS,
    enumDescriptions: [
      `The project's severity (fixpoint.toml [checks.severity]), else the rule's default (${rule.severity}).`,
      'Error.',
      'Warning.',
      'Information.',
      'Hint.',
      'Not shown.',
    ],
    markdownDescription:
      `Severity of \`${rule.code}\` findings (default: ${rule.severity}): ${rule.summary}. Restarts the server.`,
  };
}

/** package.json with its severity settings replaced by the rules' (where the old ones were). */
function packageFile(text, rules) {
  const pkg = JSON.parse(text);
  const old = pkg.contributes.configuration.properties;
  const generated = Object.fromEntries(rules.map((r, i) => [PREFIX + r.code, setting(r, i)]));
  const keys = Object.keys(old);
  let at = keys.findIndex((k) => k.startsWith(PREFIX));
  if (at < 0) at = keys.length;
  const properties = {};
  keys.slice(0, at).forEach((k) => { if (!k.startsWith(PREFIX)) properties[k] = old[k]; });
  Object.assign(properties, generated);
  keys.slice(at).forEach((k) => { if (!k.startsWith(PREFIX)) properties[k] = old[k]; });
  pkg.contributes.configuration.properties = properties;
  return JSON.stringify(pkg, null, 2) + '\n';
}

function main() {
  const check = process.argv.includes('--check');
  const catalog = catalogFromServer();
  if (catalog === null && !fs.existsSync(RULES_JSON)) {
    console.error('gen-rules: no src/rules.json and no Python with Fixpoint to make it (set FIXPOINT_PYTHON)');
    process.exit(1);
  }
  const rulesText = catalog === null ? fs.readFileSync(RULES_JSON, 'utf8') : rulesFile(catalog);
  const outputs = [
    [RULES_JSON, rulesText],
    [PACKAGE_JSON, packageFile(fs.readFileSync(PACKAGE_JSON, 'utf8'), JSON.parse(rulesText))],
  ];
  const stale = outputs.filter(([file, text]) => !fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== text);
  if (check) {
    if (catalog === null) {
      console.error('gen-rules --check: no Python with Fixpoint to compare with (set FIXPOINT_PYTHON)');
      process.exit(2);
    }
    stale.forEach(([file]) => console.error(`gen-rules --check: ${path.relative(EXT, file)} is not current; run npm run build`));
    process.exit(stale.length ? 1 : 0);
  }
  stale.forEach(([file, text]) => fs.writeFileSync(file, text));
  console.log(`gen-rules: ${JSON.parse(rulesText).length} rules; src/rules.json and package.json's settings up to date`);
}

main();
