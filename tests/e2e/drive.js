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
// The extension's status bar item (text without its icon) and VS Code's Problems counts [errors, warnings, infos].
window.__atenlensStatus = () => {
  const item = document.querySelector('.statusbar-item[id$="atenlens.status"]');
  return item && item.offsetParent !== null ? item.innerText.replace(/\u00a0/g, ' ').trim() : null;
};
window.__atenlensProblems = () => {
  const item = document.querySelector('.statusbar-item[id="status.problems"]');
  return item ? (item.textContent.match(/\\d+/g) || []).map(Number) : null;
};
// Whether a snippet's tab stop (its placeholder box) is on line n.
window.__atenlensTabStopOn = (n) => [...document.querySelectorAll('.editor-instance .snippet-placeholder')]
  .some((el) => { const r = el.getBoundingClientRect(); return window.__atenlensLineAt((r.top + r.bottom) / 2) === n; });
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
      statusIds: [...document.querySelectorAll(".statusbar-item")].map((e) => e.id).join(" "),
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

// Waits for the extension's status bar text to contain `part`; returns it with the Problems counts.
async function statusWith(page, part, timeout) {
  return until(page, (p) => {
    const text = window.__atenlensStatus();
    return text && text.includes(p) ? { text, problems: window.__atenlensProblems() } : false;
  }, part, timeout);
}

// Opens a file of the workspace from the Explorer (as 01-open does) and waits until its editor is active.
async function openFile(page, name) {
  await page.keyboard.press("Escape");
  const row = page.locator(`.explorer-folders-view .monaco-list-row[aria-label^="${name}"]`).first();
  await row.waitFor({ timeout: 10000 });
  await row.click();
  // the window's title names the active editor's file
  await until(page, (n) => document.title.includes(n) && window.__atenlensLines().length > 0, name, 10000);
}

// The lens titled `title` that sits right above `defLine` (its directive comment, if any, between), once
// it has stayed at one place for three polls (the lenses above it move when a summary lens appears).
async function findLens(page, defLine, title, timeout) {
  return until(page, ({ defLine, title }) => {
    const def = window.__atenlensLines().find((l) => l.line === defLine);
    if (!def) return false;
    const links = [...document.querySelectorAll(".editor-instance .codelens-decoration a")]
      .filter((a) => a.innerText.trim() === title)
      .map((a) => { const r = a.getBoundingClientRect(); return { x: r.left + r.width / 2, y: r.top + r.height / 2, bottom: r.bottom }; })
      .filter((r) => r.bottom <= def.top + 2);
    links.sort((a, b) => b.bottom - a.bottom);
    const lens = links[0];
    if (!lens) return false;
    const key = `${Math.round(lens.x)},${Math.round(lens.y)}`;
    const seen = window.__atenlensLensSeen;  // the place of the previous poll, and how often in a row
    window.__atenlensLensSeen = { key, times: seen && seen.key === key ? seen.times + 1 : 1 };
    return window.__atenlensLensSeen.times >= 3 ? lens : false;
  }, { defLine, title }, timeout).finally(() => page.evaluate(() => { window.__atenlensLensSeen = undefined; }).catch(() => undefined));
}

// Clicks the lens titled `title` above `defLine` until `condition(arg)` holds in the page (within 15 s of a
// click), at most three times; returns every click. A click can be lost: after a code lens refresh, VS
// Code re-resolves only the lenses in view and releases the commands of the previous ones, so a lens
// scrolled into view before VS Code re-resolves it (a debounce of 250 ms or more) still carries a released
// command, and a click on it only logs "Actual command not found". A user clicks again; so does this.
async function clickLensUntil(page, defLine, title, condition, arg) {
  const clicks = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    await page.mouse.move(5, 5);
    await moveTo(page, defLine, 1);
    const lens = await findLens(page, defLine, title, 60000);
    const at = (Date.now() - t0) / 1000;
    await page.mouse.click(lens.x, lens.y);
    try {
      clicks.push({ at, seen: await until(page, condition, arg, 15000) });
      return clicks;
    } catch (error) {
      const toasts = await page.evaluate(() => [...document.querySelectorAll(".notifications-toasts .notification-toast")]
        .map((e) => e.innerText.trim()).filter((t) => t)).catch(() => []);
      clicks.push({ at, lost: true, status: await page.evaluate(() => window.__atenlensStatus()), toasts });
    }
  }
  throw new Error(`three clicks on the "${title}" lens above line ${defLine} did nothing: ${JSON.stringify(clicks)}`);
}

// Clicks the "Trace this step" lens above `defLine` until the trace has started: the status bar says
// "tracing" (the extension sets it as soon as the command runs) or already shows `donePart`.
function clickLensUntilTracing(page, defLine, title, donePart) {
  return clickLensUntil(page, defLine, title, (done) => {
    const text = window.__atenlensStatus();
    return text && (text.includes("tracing") || text.includes(done)) ? text : false;
  }, donePart);
}

// Runs a command of the palette by its full title ("atenlens: ...").
async function runCommand(page, title) {
  await page.keyboard.press("Escape");
  await page.keyboard.press("F1");
  const box = page.locator(".quick-input-widget input");
  await box.waitFor({ state: "visible", timeout: 10000 });
  await box.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press("Enter");
}

// Hovers the extension's status bar item and returns its tooltip's text.
async function statusTooltip(page, part) {
  const point = () => page.evaluate(() => {
    const item = document.querySelector('.statusbar-item[id$="atenlens.status"]');
    if (!item) return null;
    const r = item.getBoundingClientRect();
    return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
  });
  return hoverUntil(page, point, (p) => {
    const hovers = [...document.querySelectorAll(".workbench-hover, .monaco-hover")].filter((e) => e.offsetParent !== null);
    const hit = hovers.find((e) => e.innerText.includes(p));
    return hit ? hit.innerText : false;
  }, part, 20000);
}

// Screenshots the docs use, when the test was asked for them (ATENLENS_SCREENSHOTS=1): clipped to `clip`.
async function docShot(page, name, clip) {
  if (!plan.docsImages) return null;
  const file = path.join(plan.docsImages, name);
  await page.screenshot({ path: file, clip });
  return file;
}

// The interpreter has no torch: the one message, its action opening the interpreter setting, the tooltip.
async function noTorch(page) {
  await step(page, "n2-no-torch-message", async () => {
    const toast = page.locator(".notifications-toasts .notification-toast", { hasText: "has no torch" }).first();
    await toast.waitFor({ timeout: 90000 });
    const message = (await toast.locator(".notification-list-item-message").innerText()).trim();
    const buttons = (await toast.locator(".monaco-button").allInnerTexts()).map((t) => t.trim()).filter((t) => t);
    const box = await toast.boundingBox();
    const shotFile = await docShot(page, "vscode-no-torch.png", { x: box.x - 8, y: box.y - 8, width: box.width + 16, height: box.height + 16 });
    await toast.locator(".monaco-button", { hasText: plan.chooseAction }).first().click();
    // the Settings editor, filtered to the settings its search matched
    const search = await until(page, () => {
      const titles = [...document.querySelectorAll(".settings-editor .setting-item-contents .setting-item-title")].map((e) => e.innerText.trim());
      return titles.length ? { titles } : false;
    }, null, 30000);
    const toastsLeft = await page.evaluate(() => [...document.querySelectorAll(".notifications-toasts .notification-toast")].filter((e) => e.innerText.includes("has no torch")).length);
    return { message, buttons, settings: search, toastsLeft, shot: shotFile };
  });
  await step(page, "n3-status-tooltip", async () => {
    await openFile(page, plan.file);
    const status = await statusWith(page, plan.statusExpected, 30000);
    const tooltip = await statusTooltip(page, "torch");
    return { status, tooltip };
  });
}

// Restricted Mode: the lint works, no lens offers a trace; once the workspace is trusted, they do.
async function untrusted(page) {
  await step(page, "u2-restricted-lint-only", async () => {
    await moveTo(page, plan.lintLine, 1);
    const lines = await squiggleLines(page, plan.lintLine, plan.lintTimeoutMs);
    // the lenses of the file were asked for when it opened, before its diagnostics came
    const lenses = await page.evaluate(lensTitles);
    // VS Code adds its Restricted Mode item to the status bar on its own schedule: wait for it (bounded)
    const restricted = await page
      .waitForFunction(() => [...document.querySelectorAll(".statusbar-item")].some((e) => e.innerText.includes("Restricted Mode")), null, { timeout: 15000 })
      .then(() => true, () => false);
    const status = await statusWith(page, "lint only", 30000);
    return { squiggleLines: lines, lenses, restricted, status };
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

    await ({ untrusted, "no-torch": noTorch }[plan.mode] || trusted)(page);
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
    const status = await statusWith(page, "not traced", 30000);
    return { squiggleLines: lines, hover, hintsBeforeTrace: tracedBefore, status };
  });

  // (2) Click the "Trace this step" lens of the function; hints with aten ops arrive.
  await step(page, "03-trace-hints", async () => {
    const clicks = await clickLensUntilTracing(page, plan.traceLensLine, plan.lensTitle, plan.statusExpected);
    lap("trace clicked");
    const lines = await until(page, (expect) => {
      const lines = window.__atenlensLines();
      const ok = expect.every(([n, part]) => lines.some((l) => l.line === n && l.text.includes(part)));
      return ok ? lines.map((l) => [l.line, l.text]) : false;
    }, plan.hintsExpected, plan.traceTimeoutMs);
    lap("hints");
    return { lines, clicks };
  });

  // (4) The status bar shows the trace's summary.
  await step(page, "04-status-bar", async () => statusWith(page, plan.statusExpected, 30000));

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
      await docShot(page, "vscode.png", clip);
      return { path: plan.readme.path, clip };
    });
  }

  // One problem, one diagnostic: tracing `train` runs the `.item()` line, confirms the lint's finding,
  // and the Problems count stays what it was; the status bar now speaks of `train`.
  await step(page, "07-one-problem", async () => {
    const clicks = await clickLensUntilTracing(page, plan.trainDefLine, plan.lensTitle, plan.trainStatus);
    const lines = await until(page, ([n, part]) => {
      const line = window.__atenlensLines().find((l) => l.line === n);
      return line && line.text.includes(part) ? window.__atenlensLines().map((l) => [l.line, l.text]) : false;
    }, [plan.lintLine, plan.syncHint], plan.traceTimeoutMs);
    const status = await statusWith(page, plan.trainStatus, 30000);
    return { lines, status, clicks };
  });

  // An edit inside `train`: its hints say "(stale)", and so does the status bar.
  await step(page, "08-stale", async () => {
    await moveTo(page, plan.lintLine, 1);
    await page.keyboard.press("End");
    await page.keyboard.type(plan.editText);
    // (both the stale hint and the whole typed text: the hint may come after the first keystroke)
    const lines = await until(page, ([n, part, edited, typed]) => {
      const line = window.__atenlensLines().find((l) => l.line === n);
      const edit = window.__atenlensLines().find((l) => l.line === edited);
      return line && line.text.includes(part) && edit && edit.text.endsWith(typed)
        ? window.__atenlensLines().map((l) => [l.line, l.text])
        : false;
    }, [plan.staleLine, "(stale)", plan.lintLine, plan.editText], 30000);
    const status = await statusWith(page, plan.staleStatus, 30000);
    const clip = await page.evaluate((first) => {
      const editor = document.querySelector(".editor-instance .monaco-editor").getBoundingClientRect();
      const top = window.__atenlensLines().find((l) => l.line === first).top - 6;
      return { x: editor.left, y: top, width: Math.min(editor.width, 1000), height: Math.min(editor.bottom - top, 600) };
    }, plan.staleFirstLine);
    const bar = await page.evaluate(() => document.querySelector(".part.statusbar").getBoundingClientRect().toJSON());
    await docShot(page, "vscode-stale.png", clip);
    await docShot(page, "vscode-status.png", { x: bar.x, y: bar.y - 4, width: Math.min(bar.width, 900), height: bar.height + 4 });
    return { lines, status };
  });

  // The status bar follows the active file: another file is "not traced"; back, the stale trace again.
  await step(page, "09-switch-files", async () => {
    await openFile(page, plan.otherFile);
    const other = await statusWith(page, "not traced", 30000);
    await openFile(page, plan.file);
    const back = await statusWith(page, plan.staleStatus, 30000);
    return { other, back };
  });

  // The memory timeline of train_step's trace, exported from the command palette through VS Code's save
  // dialog (code-server's is the quick-input one): the toast names the file; the test reads it.
  if (plan.exportLine) {
    await step(page, "10-export-memory-timeline", async () => {
      await moveTo(page, plan.exportLine, 5);
      await runCommand(page, plan.exportCommand);
      const box = page.locator(".quick-input-widget input");
      await box.waitFor({ state: "visible", timeout: 20000 });
      const offered = await until(page, () => {
        const input = document.querySelector(".quick-input-widget input");
        return input && input.value.endsWith(".json") ? input.value : false;
      }, null, 20000);
      await page.keyboard.press("Enter");
      const toast = page.locator(".notifications-toasts .notification-toast", { hasText: "memory timeline of" }).first();
      await toast.waitFor({ timeout: 60000 });
      const message = (await toast.locator(".notification-list-item-message").innerText()).trim();
      await page.keyboard.press("Escape");
      return { offered, message };
    });
  }

  // "Add an example call" on MLP.forward inserts a snippet whose tab stop is `x`: what is typed replaces it;
  // still undefined, the lens says "Fill in ...": a click makes the name a tab stop again, and a call the
  // module can run makes the lens "Trace this step".
  if (plan.fillDefLine) {
    await step(page, "11-fill-in-example-call", async () => {
      const def = plan.fillDefLine;
      // inserted, with a snippet tab stop (VS Code draws a box around it) on the directive's line
      const addClicks = await clickLensUntil(page, def, plan.addTitle, ([n, text]) => {
        const line = window.__atenlensLines().find((l) => l.line === n);
        return line && line.text.includes(text) && window.__atenlensTabStopOn(n) ? line.text : false;
      }, [def, plan.addedDirective]);
      const added = addClicks[addClicks.length - 1].seen;
      await page.keyboard.insertText(plan.firstTyped);  // over the selected tab stop
      const typed = await until(page, ([n, text]) => {
        const line = window.__atenlensLines().find((l) => l.line === n);
        return line && line.text.includes(text) ? line.text : false;
      }, [def, plan.firstTypedDirective], 20000);
      await page.keyboard.press("Escape");
      const fillTitle = await until(page, (prefix) =>
        [...document.querySelectorAll(".editor-instance .codelens-decoration a")].map((a) => a.innerText.trim()).find((t) => t.startsWith(prefix)) || false,
        plan.fillTitlePrefix, 60000);
      const fillClicks = await clickLensUntil(page, def + 1, fillTitle, (n) => window.__atenlensTabStopOn(n), def);
      // the snippet replaces the call: the name to fill in is selected again, and what is typed replaces it
      await page.keyboard.insertText(plan.secondTyped);
      const filled = await until(page, ([n, text]) => {
        const line = window.__atenlensLines().find((l) => l.line === n);
        return line && line.text.includes(text) ? line.text : false;
      }, [def, plan.filledDirective], 20000);
      await page.keyboard.press("Escape");
      const lens = await findLens(page, def + 1, plan.lensTitle, 60000);
      return { added, typed, fillTitle, filled, traceLens: !!lens, clicks: [addClicks, fillClicks] };
    });
  }

  // A trace that runs long shows its seconds at the lens beside "Cancel"; Cancel stops it, the status bar
  // says so and the lens offers the trace again.
  if (plan.slowFile) {
    await step(page, "12-cancel", async () => {
      await openFile(page, plan.slowFile);
      const clicks = await clickLensUntilTracing(page, plan.slowDefLine, plan.lensTitle, plan.cancelledStatus);
      const running = await until(page, () => {
        // a lens with no command (the seconds) is a span, one with a command (Cancel) a link
        const titles = [...document.querySelectorAll(".editor-instance .codelens-decoration > *")]
          .map((e) => e.innerText.replace(/\u00a0/g, " ").trim()).filter((t) => t && t !== "|");
        const counting = titles.find((t) => /^tracing… [1-9]\d*\.\d s$/.test(t));
        return counting && titles.includes("Cancel") ? titles : false;
      }, null, 60000);
      const cancelClicks = await clickLensUntil(page, plan.slowDefLine, "Cancel", (part) => {
        const text = window.__atenlensStatus();
        return text && text.includes(part) ? text : false;
      }, plan.cancelledStatus);
      const status = await statusWith(page, plan.cancelledStatus, 30000);
      const lens = await findLens(page, plan.slowDefLine, plan.lensTitle, 60000);
      return { clicks, running, cancelClicks, status, traceLens: !!lens };
    });
  }
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error), steps: result.steps }) + "\n");
  process.exit(2);
});
