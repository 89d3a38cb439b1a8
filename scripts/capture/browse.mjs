// Drives a real Chromium (Debian's, through playwright-core) over a local
// site and records what a browser's users record: a HAR 1.2 file (Playwright's
// recorder) and the DevTools protocol's Network events (a JSON array of
// {method, params}, as a protocol client sees them).
//
//   node browse.mjs BASE_URL OUT.har OUT.cdp.json [VISITS] [SEED]
//
// VISITS tabs (default 6) open the long page, starting 0.7 s apart, with the
// browser's cache off (every visit asks for its own bytes, as separate users
// would). Each scrolls at its own pace (lazy images are asked for, and Chrome
// raises the priority of those that come into view), then follows the link
// before everything has arrived (the old page's requests are cancelled) and
// reads the second page, which shares the style and scripts.
import { chromium } from "playwright-core";
import { writeFileSync } from "node:fs";

const [base, harPath, cdpPath, visitsText, seedText] = process.argv.slice(2);
const visits = Number(visitsText ?? 6);
let seed = Number(seedText ?? 1);
const random = () => {  // A small seeded generator (mulberry32): the same visits each time.
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({
  recordHar: { path: harPath, content: "omit" },
  viewport: { width: 1280, height: 800 },
});
const events = [];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function visit(index) {
  await sleep(700 * index);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  for (const method of ["requestWillBeSent", "resourceChangedPriority", "responseReceived",
                        "loadingFinished", "loadingFailed", "requestServedFromCache"]) {
    cdp.on(`Network.${method}`, (params) => events.push({ method: `Network.${method}`, params }));
  }
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  await page.goto(`${base}/index.html`, { waitUntil: "commit" });
  const steps = 6 + Math.floor(random() * 10);
  for (let y = 0; y < steps; ++y) {
    await page.waitForTimeout(150 + Math.floor(random() * 250));
    await page.mouse.wheel(0, 400 + Math.floor(random() * 600));
  }
  await page.click("#next", { noWaitAfter: true });
  await page.waitForTimeout(5000);
}

await Promise.all(Array.from({ length: visits }, (_, i) => visit(i)));
await context.close();  // Writes the HAR.
await browser.close();
writeFileSync(cdpPath, "[\n" + events.map((e) => JSON.stringify(e)).join(",\n") + "\n]\n");
console.error(`browse.mjs: ${visits} visits, ${events.length} events, HAR in ${harPath}`);
