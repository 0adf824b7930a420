"""Fidelity sweep: trace FILE::FN through the real CLI (`atenlens trace --json`, simulated CUDA) and
compare its ops with an eager CPU run of the same function (eager.py): status, stdout, op counts per
phase, and per (phase, line) the ops with their output shapes and dtypes (bookkeeping ops left out).
Differences that are CPU-versus-CUDA kernel choices are expected (docs/fidelity.md lists them).

    python bench/fidelity_sweep/compare.py bench/fidelity_sweep/plain.py rnn [--out DIR]

The configuration files (hf_text.py, vision2.py, plain.py, lit_manual.py, core3.py, libs3.py, round4.py,
round5.py, round6.py) need the `models` extra (round6.py's two distributed configurations are traced only:
`atenlens trace FILE::FN` with this folder and tests/fixtures/models on PYTHONPATH)
and build every model from a small config; each function has an `# atenlens:` example call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("function")
    parser.add_argument("--out", default="/tmp/atenlens-fidelity", help="where both runs' JSON is kept")
    options = parser.parse_args()
    path, fn = os.path.abspath(options.file), options.function
    lines = open(path).read().splitlines()
    call = next(
        line.split("atenlens:", 1)[1].strip()
        for line in lines
        if line.startswith("# atenlens:") and re.search(rf"\b{fn}\(", line)
    )
    os.makedirs(options.out, exist_ok=True)
    tag = f"{os.path.basename(path)[:-3]}.{fn}"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.join(HERE, "..", "..", "tests", "fixtures", "models")])
    )
    traced = subprocess.run(
        [os.path.join(BIN, "atenlens"), "trace", f"{path}::{fn}", "--json", "--timeout", "300"],
        capture_output=True,
        text=True,
        env=env,
    )
    eager = subprocess.run(
        [sys.executable, os.path.join(HERE, "eager.py"), path, fn, call], capture_output=True, text=True, env=env
    )
    for suffix, text in (("trace", traced.stdout), ("eager", eager.stdout)):
        with open(os.path.join(options.out, f"{tag}.{suffix}.json"), "w") as out:
            out.write(text)
    report = json.loads(traced.stdout)
    truth = json.loads(eager.stdout.splitlines()[-1])
    print(
        f"== {tag}: trace {report['status']} ({report['message'][:300]}) | eager {truth['status']} ({truth['message'][:300]})"
    )
    print("  stdout: trace", repr(report["stdout"][-200:]), "eager", repr(truth["stdout"][-200:]))
    for d in report["diagnostics"]:
        print("  diagnostic", d["code"], d["line"], d.get("count"), d["message"][:160])
    bookkeeping = set(report.get("bookkeeping_ops", ()))
    traced_ops = [e for e in report["events"] if e["kind"] == "op" and e["name"] not in bookkeeping]
    eager_ops = [e for e in truth["events"] if e["name"] not in bookkeeping]

    def totals(ops: list) -> Counter:
        return Counter((e["phase"], e["name"]) for e in ops)

    def by_line(ops: list) -> dict:
        found: dict = defaultdict(Counter)
        for e in ops:
            found[(e["phase"], e["line"])][
                (e["name"], tuple((tuple(o["shape"]), o["dtype"]) for o in e["outputs"]))
            ] += 1
        return found

    t_totals, e_totals = totals(traced_ops), totals(eager_ops)
    print(f"  ops: trace {sum(t_totals.values())}, eager {sum(e_totals.values())}")
    for key in sorted(set(t_totals) | set(e_totals), key=str):
        if t_totals[key] != e_totals[key]:
            print(f"  total {key}: trace {t_totals[key]}, eager {e_totals[key]}")
    t_lines, e_lines = by_line(traced_ops), by_line(eager_ops)
    differing = [k for k in sorted(set(t_lines) | set(e_lines), key=str) if t_lines[k] != e_lines[k]]
    for key in differing[:25]:
        print(
            f"  line {key}: only traced {dict(t_lines[key] - e_lines[key])}, only eager {dict(e_lines[key] - t_lines[key])}"
        )
    print(f"  lines differing: {len(differing)} of {len(set(t_lines) | set(e_lines))}")


if __name__ == "__main__":
    main()
