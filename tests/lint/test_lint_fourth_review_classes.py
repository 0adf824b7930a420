"""Classes of error found by the fourth review of real code (a held-out false finding, and the
whole trees of tests/lint/corpus_real/WHOLE_TREES.md "Fourth review"), each with a small program
and the exact findings: line, column (0-based), code, severity and message. Each program is also
linted without the prefilter (every definition parsed), which must give the same findings."""

from __future__ import annotations

from textwrap import dedent

from atenlens.lint.engine import lint_source_strict

Row = tuple[int, int, str, str, str]


def findings(source: str) -> list[Row]:
    found = [(f.line, f.column, f.code, f.severity, f.message) for f in lint_source_strict(source)]
    unfiltered = [
        (f.line, f.column, f.code, f.severity, f.message) for f in lint_source_strict(source, prefilter=False)
    ]
    assert found == unfiltered
    return found


KEPT = (
    "`.cpu()` inside a loop: the host waits for the GPU on every iteration, collecting results on the host"
    " (`results[key] = t.cpu()`: one copy per result, as intended)"
)

STORED_THROUGH_A_HOST_FUNCTION = dedent(
    """\
    import torch
    from scipy.sparse import csc_matrix


    class Explainer:
        def explain(self, loader):
            results = []
            for data in loader:
                data = data.to(self.device).float()
                M_explain, masks = self.network.forward_masks(data)
                for key, value in masks.items():
                    masks[key] = csc_matrix.dot(value.cpu().detach().numpy(), self.reducing_matrix)
                results.append(masks)
            return results

        def train(self, loader):
            for data in loader:
                loss, masks = self.network(data.to(self.device))
                for key, value in masks.items():
                    masks[key] = csc_matrix.dot(value.cpu().numpy(), self.reducing_matrix)
                loss.backward()
                self.optimizer.step()
    """
)


def test_a_host_copy_stored_under_a_key_through_a_host_function_is_a_kept_result() -> None:
    """`masks[key] = csc_matrix.dot(value.cpu().numpy(), m)` keeps an explanation per batch on the
    host, as `masks[key] = value.cpu().numpy()` does (pytorch-tabnet's `explain`): information.
    In a loop that takes a training step it is a wait per step: a warning."""
    assert findings(STORED_THROUGH_A_HOST_FUNCTION) == [
        (12, 50, "AL100", "information", KEPT),
        (
            20,
            50,
            "AL100",
            "warning",
            "`.cpu()` inside a loop: the host waits for the GPU on every iteration",
        ),
    ]


EVALUATION_IN_AN_ENVIRONMENT = dedent(
    """\
    import time

    import torch


    def train(actor, test_env, collector, device="cuda"):
        for i, data in enumerate(collector):
            actor.eval()
            eval_start = time.time()
            test_reward = eval_model(actor, test_env, num_episodes=3)
            eval_time = time.time() - eval_start
            start = time.time()
            score = evaluate(actor, data.to(device))
            score_time = time.time() - start
            log(eval_time, score_time)
    """
)


def test_a_timed_call_handed_an_environment_is_host_work() -> None:
    """`eval_model(actor, test_env, ...)` steps the environment on the host, which waits for each
    action (torchrl's IMPALA script): no AL301. `evaluate(actor, data)`, spelled as no model and
    given no environment, is not taken for GPU work either: AL301 needs a model, a training step
    or a torch op in the interval."""
    assert findings(EVALUATION_IN_AN_ENVIRONMENT) == []
    assert findings(EVALUATION_IN_AN_ENVIRONMENT.replace("eval_model(actor, test_env", "actor(test_obs")) == [
        (
            11,
            20,
            "AL301",
            "warning",
            "`time.time()` read with no synchronize since the clock read on line 9: CUDA work is asynchronous, "
            "so the interval measures its launch, not its run time",
        )
    ]
