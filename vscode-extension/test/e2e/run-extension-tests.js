// Run the extension's integration tests inside code-server's extension host: the web counterpart of
// @vscode/test-electron's runTests(). The workbench URL's `payload` carries extensionDevelopmentPath and
// extensionTestsPath (code-server must run with --vscode-option enable-smoke-test-driver); the
// workbench calls window.codeAutomationExit(code) when the tests end.
//   node run-extension-tests.js EXT_DIR TESTS_JS FOLDER PORT      (exit 0: the tests passed)
const { launch, clock } = require('./browser');

const [extDir, testsPath, folder, port] = process.argv.slice(2);
if (!port) {
  console.error('usage: run-extension-tests.js EXT_DIR TESTS_JS FOLDER PORT');
  process.exit(2);
}
const authority = `127.0.0.1:${port}`;
const remote = (p) => `vscode-remote://${authority}${p}`;
const payload = JSON.stringify([['extensionDevelopmentPath', remote(extDir)], ['extensionTestsPath', remote(testsPath)]]);
const url = `http://${authority}/?folder=${encodeURIComponent(folder)}&payload=${encodeURIComponent(payload)}`;
const log = clock();
const timeoutMs = Number(process.env.TEST_TIMEOUT_MS || 300000);

(async () => {
  const browser = await launch();
  let code = 2;
  try {
    const page = await browser.newPage();
    const done = new Promise((resolve) => {
      page.exposeFunction('codeAutomationExit', (c) => resolve(c));
      page.exposeFunction('codeAutomationLog', (type, args) => {
        // The test's own console.log lines (ok/FAIL per step); the extension host's chatter stays out.
        const text = args.map(String).join(' ');
        if (/^(ok|FAIL|NOTE) {1,4}/.test(text) || type === 'error') console.log(`  ${text}`);
      });
    });
    page.on('console', (m) => { if (m.type() === 'error') log(`console.error: ${m.text().slice(0, 300)}`); });
    log(`open the workbench with the extension under development: ${folder}`);
    await page.goto(url, { waitUntil: 'domcontentloaded' });
    const timeout = new Promise((resolve) => setTimeout(() => resolve('timeout'), timeoutMs));
    code = await Promise.race([done, timeout]);
    log(`codeAutomationExit -> ${code}`);
  } finally {
    await browser.close();
  }
  process.exit(code === 0 ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
