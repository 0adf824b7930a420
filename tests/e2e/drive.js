// Drives a running code-server (a real VS Code) in headless Chromium and reports what the page shows.
//   node drive.js PLAN_JSON
// The plan (written by tests/e2e/test_vscode.py) says where to look: the URL, the file to open, the line
// the lint should flag, the function whose "Trace this step" lens to click, the lines whose hints and hover
// to read, the status bar text to wait for. Every step waits on a condition in the page, never a fixed time.
// Prints one JSON object: what each step saw, or the step that failed with the page's text; exit 0 / 1.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const plan = JSON.parse(process.argv[2]);
const { chromium } = require(plan.playwrightCore);

const t0 = Date.now();
const result = { steps: [], timings: {} };
const lap = (name) => (result.timings[name] = (Date.now() - t0) / 1000);

// --- page-side helpers (run inside the page with page.evaluate / waitForFunction) ---------------------

// Visible editor lines as {line, top, bottom, text, left}: line numbers from the gutter, text (with inlay
// hints, which are real text) from the view line at the same height. Non-breaking spaces become spaces.
const PAGE_HELPERS = `
window.__atenlensLines = () => {
  const editor = document.querySelector('.editor-instance .monaco-editor');
  if (!editor) return [];
  const numbers = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')].map((el) => {
    const r = el.getBoundingClientRect(); return { line: parseInt(el.textContent, 10), top: r.top, bottom: r.bottom };
  });
  const views = [...editor.querySelectorAll('.view-lines .view-line')].map((el) => {
    const r = el.getBoundingClientRect();
    return { top: r.top, bottom: r.bottom, left: r.left, text: el.innerText.replace(/\\u00a0/g, ' ') };
  });
  return numbers.map((n) => {
    const v = views.find((v) => Math.abs(v.top - n.top) < 2);
    return { line: n.line, top: n.top, bottom: n.bottom, text: v ? v.text : '', left: v ? v.left : 0 };
  }).filter((l) => !Number.isNaN(l.line)).sort((a, b) => a.line - b.line);
};
window.__atenlensLineAt = (y) => {
  const hit = window.__atenlensLines().find((l) => y >= l.top - 1 && y < l.bottom - 1);
  return hit ? hit.line : null;
};
`;

async function pageText(page) {
  return page.evaluate(() => {
    const pick = (sel) => [...document.querySelectorAll(sel)].map((e) => e.innerText).join("\n");
    return {
      editor: (window.__atenlensLines ? window.__atenlensLines() : []).map((l) => `${l.line}: ${l.text}`).join("\n"),
      statusBar: pick(".statusbar-item").replace(/\n+/g, " | "),
      notifications: pick(".notifications-toasts .notification-list-item, .notification-toast"),
      hover: pick(".monaco-editor .monaco-hover:not(.hidden)"),
      lenses: pick(".codelens-decoration"),
    };
  }).catch((e) => ({ error: String(e) }));
}

async function shot(page, name) {
  const file = path.join(plan.shotsDir, `${name}.png`);
  await page.screenshot({ path: file }).catch(() => undefined);
  return file;
}

async function step(page, name, body) {
  const started = (Date.now() - t0) / 1000;
  try {
    const seen = await body();
    result.steps.push({ name, ok: true, seen, at: started, took: (Date.now() - t0) / 1000 - started });
    await shot(page, name);
  } catch (error) {
    result.steps.push({ name, ok: false, error: String(error && error.message ? error.message : error),
                        page: await pageText(page), screenshot: await shot(page, `${name}-failed`) });
    throw error;
  }
}

// Waits until fn(arg) in the page returns a truthy value and hands that value back.
async function until(page, fn, arg, timeout) {
  const handle = await page.waitForFunction(fn, arg, { timeout, polling: 200 });
  return handle.jsonValue();
}

// Moves the mouse onto point() and waits for condition(arg) in the page; again from a fresh point() while
// the layout settles (the workbench may still move things around right after opening).
async function hoverUntil(page, point, condition, arg, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const at = await point();
    if (at) {
      await page.mouse.move(5, 5);
      await page.mouse.move(at.x, at.y, { steps: 5 });
      try {
        return await until(page, condition, arg, Math.max(1000, Math.min(4000, deadline - Date.now())));
      } catch (error) {
        if (Date.now() >= deadline) throw error;
      }
    } else if (Date.now() >= deadline) {
      throw new Error("nothing to hover");
    }
  }
}

async function moveTo(page, line, column) {
  // Ctrl+G (Go to Line) reveals the line and puts the cursor on it.
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+G");
  const box = page.locator(".quick-input-widget input");
  await box.waitFor({ state: "visible", timeout: 10000 });
  await box.fill(`:${line}:${column}`);
  await page.keyboard.press("Enter");
  await box.waitFor({ state: "hidden", timeout: 10000 });
  await until(page, (n) => window.__atenlensLines().some((l) => l.line === n), line, 10000);
}

// The centre of the first non-blank code of a visible line, in page coordinates.
async function codePoint(page, line) {
  return page.evaluate((n) => {
    const editor = document.querySelector(".editor-instance .monaco-editor");
    const target = window.__atenlensLines().find((l) => l.line === n);
    if (!target) return null;
    const view = [...editor.querySelectorAll(".view-lines .view-line")]
      .find((el) => Math.abs(el.getBoundingClientRect().top - target.top) < 2);
    const span = [...view.querySelectorAll("span > span")].find((s) => s.textContent.trim() !== "");
    const r = span.getBoundingClientRect();
    return { x: r.left + Math.min(r.width / 2, 20), y: (r.top + r.bottom) / 2 };
  }, line);
}

const lensTitles = () => [...document.querySelectorAll(".editor-instance .codelens-decoration a")].map((a) => a.innerText.trim());

async function squiggleLines(page, line, timeout) {
  return until(page, (n) => {
    const marks = [...document.querySelectorAll(".editor-instance .monaco-editor .squiggly-warning")];
    const lines = marks.map((m) => { const r = m.getBoundingClientRect(); return window.__atenlensLineAt((r.top + r.bottom) / 2); });
    return lines.includes(n) ? lines : false;
  }, line, timeout);
}

// Restricted Mode: the lint works, no lens offers a trace; once the workspace is trusted, they do.
async function untrusted(page) {
  await step(page, "u2-restricted-lint-only", async () => {
    await moveTo(page, plan.lintLine, 1);
    const lines = await squiggleLines(page, plan.lintLine, plan.lintTimeoutMs);
    // the lenses of the file were asked for when it opened, before its diagnostics came
    const lenses = await page.evaluate(lensTitles);
    const restricted = await page.evaluate(() => [...document.querySelectorAll(".statusbar-item")].some((e) => e.innerText.includes("Restricted Mode")));
    return { squiggleLines: lines, lenses, restricted };
  });
  await step(page, "u3-trusted-traces", async () => {
    await page.keyboard.press("F1");
    const box = page.locator(".quick-input-widget input");
    await box.waitFor({ state: "visible", timeout: 10000 });
    await box.fill(">Workspaces: Manage Workspace Trust");
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "Manage Workspace Trust" }).first().waitFor({ timeout: 10000 });
    await page.keyboard.press("Enter");
    const trust = page.locator(".workspace-trust-editor .monaco-button", { hasText: /^Trust$/ }).first();
    await trust.waitFor({ timeout: 20000 });
    await trust.click();
    // the editor stays rendered under the trust editor (a modal): its lenses show there
    const lenses = await until(page, (title) => {
      const titles = [...document.querySelectorAll(".editor-instance .codelens-decoration a")].map((a) => a.innerText.trim());
      return titles.includes(title) ? titles : false;
    }, plan.lensTitle, 90000);
    return { lenses };
  });
}

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "atenlens-chromium-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: plan.chromium,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = context.pages()[0] || (await context.newPage());
    await page.addInitScript(PAGE_HELPERS);
    await page.goto(plan.url, { waitUntil: "domcontentloaded" });

    await step(page, "01-open", async () => {
      await page.waitForSelector(".monaco-workbench", { timeout: 90000 });
      lap("workbench");
      const row = page.locator(`.explorer-folders-view .monaco-list-row[aria-label^="${plan.file}"]`).first();
      await row.waitFor({ timeout: 60000 });
      await row.click();
      await until(page, () => window.__atenlensLines().length > 5, null, 60000);
      lap("editor");
      return { lines: await page.evaluate(() => window.__atenlensLines().length) };
    });

    await (plan.mode === "untrusted" ? untrusted(page) : trusted(page));
    result.ok = true;
  } catch (error) {
    result.ok = false;
    result.error = String(error && error.message ? error.message : error);
  } finally {
    if (context) await context.close().catch(() => undefined);
    fs.rmSync(profile, { recursive: true, force: true });
  }
  result.timings.total = (Date.now() - t0) / 1000;
  process.stdout.write(JSON.stringify(result) + "\n");
  process.exit(result.ok ? 0 : 1);
}

// The four checks of a trusted workspace, and the README's picture.
async function trusted(page) {
  // (1) The lint's warning, before anything is traced: a squiggle on the line, its message on hover.
  await step(page, "02-lint-squiggle", async () => {
    await moveTo(page, plan.lintLine, 1);
    const lines = await squiggleLines(page, plan.lintLine, plan.lintTimeoutMs);
    lap("lint");
    const squigglePoint = () => page.evaluate((n) => {
      const marks = [...document.querySelectorAll(".editor-instance .monaco-editor .squiggly-warning")];
      const hit = marks.find((m) => { const r = m.getBoundingClientRect(); return window.__atenlensLineAt((r.top + r.bottom) / 2) === n; });
      if (!hit) return null;
      const r = hit.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
    }, plan.lintLine);
    const hover = await hoverUntil(page, squigglePoint, () => {
      const h = [...document.querySelectorAll(".monaco-editor .monaco-hover:not(.hidden)")].find((e) => e.innerText.trim());
      return h ? h.innerText : false;
    }, null, 30000);
    const tracedBefore = await page.evaluate(() => window.__atenlensLines().some((l) => /·|∇/.test(l.text)));
    await page.mouse.move(5, 5);
    await page.keyboard.press("Escape");
    return { squiggleLines: lines, hover, hintsBeforeTrace: tracedBefore };
  });

  // (2) Click the "Trace this step" lens of the function; hints with aten ops arrive.
  await step(page, "03-trace-hints", async () => {
    await moveTo(page, plan.traceDefLine, 1);
    const lens = await until(page, ({ defLine, title }) => {
      const def = window.__atenlensLines().find((l) => l.line === defLine);
      if (!def) return false;
      // The lens of a function sits right above its first line (its directive comment, if any).
      const links = [...document.querySelectorAll(".editor-instance .codelens-decoration a")]
        .filter((a) => a.innerText.trim() === title)
        .map((a) => { const r = a.getBoundingClientRect(); return { x: r.left + r.width / 2, y: r.top + r.height / 2, bottom: r.bottom }; })
        .filter((r) => r.bottom <= def.top + 2);
      links.sort((a, b) => b.bottom - a.bottom);
      return links[0] || false;
    }, { defLine: plan.traceLensLine, title: plan.lensTitle }, 60000);
    await page.mouse.click(lens.x, lens.y);
    lap("trace clicked");
    const lines = await until(page, (expect) => {
      const lines = window.__atenlensLines();
      const ok = expect.every(([n, part]) => lines.some((l) => l.line === n && l.text.includes(part)));
      return ok ? lines.map((l) => [l.line, l.text]) : false;
    }, plan.hintsExpected, plan.traceTimeoutMs);
    lap("hints");
    return { lines };
  });

  // (4) The status bar shows the trace's summary.
  await step(page, "04-status-bar", async () => {
    const text = await until(page, (part) => {
      const items = [...document.querySelectorAll(".statusbar-item")].map((e) => e.innerText.trim());
      return items.find((t) => t.includes(part)) || false;
    }, plan.statusExpected, 30000);
    return { text };
  });

  // (3) Hovering a traced line shows the op table.
  await step(page, "05-hover-op-table", async () => {
    const hover = await hoverUntil(page, () => codePoint(page, plan.hoverLine), (part) => {
      const h = [...document.querySelectorAll(".monaco-editor .monaco-hover:not(.hidden)")].find((e) => e.querySelector("table"));
      if (!h || !h.innerText.includes(part)) return false;
      const rows = [...h.querySelectorAll("table tr")].map((tr) => [...tr.children].map((c) => c.innerText.trim()));
      return { text: h.innerText, rows };
    }, plan.hoverExpected, 30000);
    lap("hover");
    return hover;
  });

  // The picture for the README: the traced functions with their hints and lenses, one hover open.
  if (plan.readme) {
    await step(page, "06-readme", async () => {
      await page.mouse.move(5, 5);
      await page.keyboard.press("Escape");
      await moveTo(page, plan.readme.firstLine, 1);
      await page.keyboard.press("Control+Home");
      await until(page, (n) => window.__atenlensLines().some((l) => l.line === n), plan.readme.hoverLine, 10000);
      await hoverUntil(page, () => codePoint(page, plan.readme.hoverLine), (part) => {
        const h = [...document.querySelectorAll(".monaco-editor .monaco-hover:not(.hidden)")].find((e) => e.querySelector("table"));
        return !!h && h.innerText.includes(part);
      }, plan.readme.hoverExpected, 30000);
      const clip = await page.evaluate((first) => {
        const editor = document.querySelector(".editor-instance .monaco-editor").getBoundingClientRect();
        const top = window.__atenlensLines().find((l) => l.line === first).top - 6;
        return { x: editor.left, y: top, width: Math.min(editor.width, 1000), height: Math.min(editor.bottom - top, 600) };
      }, plan.readme.firstLine);
      await page.screenshot({ path: plan.readme.path, clip });
      return { path: plan.readme.path, clip };
    });
  }
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error), steps: result.steps }) + "\n");
  process.exit(2);
});
