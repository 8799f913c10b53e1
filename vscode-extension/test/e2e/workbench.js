// Drive the real workbench (code-server in headless Chromium) the way a user does, with the packaged
// .vsix installed: open a generated source of the seeded firmware tree, wait for the server's squiggle,
// open the Problems panel and save a screenshot of it. With FLASH=1 then also: apply the zero-point
// quick fix from the lightbulb menu, save, run "Fixpoint: Regenerate Model" and "Fixpoint: Flash and
// Verify" (qemu-m4) from the command palette, and screenshot the report view.
//   node workbench.js URL OUT_DIR [FLASH]       (exit 0: every step passed)
const fs = require('fs');
const path = require('path');
const { launch, clock } = require('./browser');

const [url, outDir, flash = '0'] = process.argv.slice(2);
if (!outDir) {
  console.error('usage: workbench.js URL OUT_DIR [FLASH]');
  process.exit(2);
}
const log = clock();
const LONG = 120000;

async function quickOpen(page, name) {
  await page.keyboard.press('Control+P');
  await page.waitForSelector('.quick-input-widget input', { timeout: 30000 });
  await page.keyboard.type(name);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first().waitFor({ timeout: 30000 });
  await page.keyboard.press('Enter');
  await page.locator('.tab.active', { hasText: name }).first().waitFor({ timeout: 30000 });
}

async function runCommand(page, title) {
  await page.keyboard.press('F1');
  await page.waitForSelector('.quick-input-widget input', { timeout: 30000 });
  await page.keyboard.type(title);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ timeout: 30000 });
  await page.keyboard.press('Enter');
}

async function frameWith(page, text, timeout) {
  const end = Date.now() + timeout;
  while (Date.now() < end) {
    for (const frame of page.frames()) {
      const html = await frame.content().catch(() => '');
      if (html.includes(text)) return frame;
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no frame shows ${JSON.stringify(text)}`);
}

(async () => {
  fs.mkdirSync(outDir, { recursive: true });
  const browser = await launch();
  log(`chromium ${browser.version()}`);
  let ok = false;
  let page;
  try {
    page = await browser.newPage({ viewport: { width: 1500, height: 900 } });
    page.on('pageerror', (e) => log(`pageerror: ${e.message.slice(0, 200)}`));
    await page.goto(url, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('.monaco-workbench', { timeout: 90000 });
    await page.waitForSelector('.explorer-folders-view .monaco-list-row', { timeout: 90000 });
    log('workbench up, explorer populated');
    await page.locator('.monaco-workbench').click({ position: { x: 750, y: 450 } }).catch(() => {});

    await quickOpen(page, 'model.c');
    await page.waitForSelector('.monaco-editor .squiggly-warning, .monaco-editor .squiggly-error', { timeout: LONG });
    log('model.c: the stale-generated squiggle is drawn (server -> publishDiagnostics -> editor)');
    await page.keyboard.press('Control+Shift+M');
    const problems = page.locator('.markers-panel');
    await problems.getByText('stale: generated from').first().waitFor({ timeout: 30000 });
    await problems.getByText('must be in [-128, 127]').first().waitFor({ timeout: 30000 });
    log('Problems panel lists the fixpoint findings (stale-generated, wrong-zero-point)');
    await page.waitForTimeout(500);
    const shot = path.join(outDir, 'workbench-problems.png');
    await page.screenshot({ path: shot });
    log(`screenshot -> ${shot}`);

    if (flash === '1') {
      // Double-click the finding in the Problems panel: the editor opens with the cursor on it.
      const row = problems.locator('.monaco-list-row', { hasText: 'must be in [-128, 127]' }).first();
      const [, line] = /Ln (\d+), Col \d+/.exec(await row.innerText()) || [];
      if (!line) throw new Error('no position in the Problems row');
      await row.dblclick(); // opens the JSON with the finding's range selected
      await page.locator('.statusbar', { hasText: `Ln ${line},` }).first().waitFor({ timeout: 30000 });
      // Quick Fix (Ctrl+.): the menu needs the code actions of the position; retry while they arrive.
      const fix = page.getByText('Set the zero point to -128 (int8)').first();
      for (let attempt = 1; ; attempt++) {
        await page.keyboard.press('Control+.');
        if (await fix.waitFor({ timeout: 5000 }).then(() => true, () => false)) break;
        if (attempt === 6) throw new Error('the quick-fix menu did not offer "Set the zero point to -128 (int8)"');
        await page.keyboard.press('Escape');
      }
      await fix.click();
      await page.keyboard.press('Control+S');
      await problems.getByText('must be in [-128, 127]').first().waitFor({ state: 'detached', timeout: 30000 });
      log('quick fix "Set the zero point to -128 (int8)" applied from the lightbulb menu and saved');

      await runCommand(page, 'Fixpoint: Regenerate Model');
      await page.getByText('regenerated the model sources').first().waitFor({ timeout: LONG });
      log('"Fixpoint: Regenerate Model" from the palette: sources regenerated');

      await runCommand(page, 'Fixpoint: Flash and Verify');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'qemu-m4' }).first().waitFor({ timeout: 30000 });
      await page.keyboard.type('qemu-m4');
      await page.keyboard.press('Enter');
      log('"Fixpoint: Flash and Verify" -> qemu-m4 picked');
      await page.locator('.tab', { hasText: 'Fixpoint: verify qemu-m4' }).first().waitFor({ timeout: 300000 });
      await frameWith(page, 'badge pass', 30000);
      await page.getByText('Flash and verify on qemu-m4: PASS').first().waitFor({ timeout: 30000 });
      log('report view open: verdict PASS, per-layer table and chart');
      // The report alone, tall enough for the chart and the table.
      await page.keyboard.press('Control+J'); // hide the panel
      await page.keyboard.press('Control+B'); // hide the side bar
      await page.locator('.tab', { hasText: 'Fixpoint: verify qemu-m4' }).first().click();
      await page.keyboard.press('Control+K'); // Ctrl+K Ctrl+M: maximize the report's editor group
      await page.keyboard.press('Control+M');
      await page.setViewportSize({ width: 1500, height: 1500 });
      await page.waitForTimeout(1200);
      const report = path.join(outDir, 'report-view.png');
      await page.screenshot({ path: report });
      log(`screenshot -> ${report}`);
    }
    ok = true;
  } catch (e) {
    log(`FAILED: ${String(e.message || e).split('\n')[0]}`);
    if (page) await page.screenshot({ path: path.join(outDir, 'workbench-failure.png') }).catch(() => {});
  } finally {
    await browser.close();
  }
  process.exit(ok ? 0 : 1);
})();
