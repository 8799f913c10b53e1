// Headless Chromium (Debian's /usr/bin/chromium, or $CHROMIUM) through playwright-core: no browser
// download. Shared by run-extension-tests.js and workbench.js.
const { chromium } = require('playwright-core');

exports.launch = () => chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--no-first-run', '--disable-dev-shm-usage'],
});

exports.clock = () => {
  const t0 = Date.now();
  return (message) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${message}`);
};
