// runpage.mjs: opens a Paperclip run page in headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core), waits until the page shows
// the run's final status, saves a screenshot and prints the page's text.
//
//   node runpage.mjs URL OUT.png WAIT_TEXTS [CLICK_TEXT]
//
// WAIT_TEXTS: texts separated by "|", each awaited (case-insensitively) in
// the page's text before the screenshot.
// NODE_PATH must reach playwright-core (hack/paperclip/install.sh's
// node_modules). CHROMIUM overrides the browser's path.
import { createRequire } from "node:module";
import path from "node:path";

const [url, out, waitText, clickText] = process.argv.slice(2);
if (!url || !out || !waitText) {
  console.error("usage: node runpage.mjs URL OUT.png WAIT_TEXT [CLICK_TEXT]");
  process.exit(2);
}
const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), "x.js"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(url, { waitUntil: "networkidle", timeout: 120_000 });
  for (const text of waitText.split("|")) {
    await page.waitForFunction(
      (t) => document.body.innerText.toLowerCase().includes(t),
      text.toLowerCase(),
      { timeout: 120_000 },
    );
  }
  if (clickText) {
    const el = page.getByText(clickText, { exact: true }).first();
    if (await el.count()) await el.click().catch(() => undefined);
    await page.waitForTimeout(500);
  }
  await page.waitForLoadState("networkidle").catch(() => undefined);
  await page.screenshot({ path: out, fullPage: true });
  process.stdout.write(await page.innerText("body"));
} finally {
  await browser.close();
}
