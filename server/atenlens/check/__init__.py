"""`atenlens check`: budgets and baselines for traced functions, for CI (docs/check.md).

Torch-free: the functions are traced in one warm trace worker (atenlens.worker.client); this
package only reads `[tool.atenlens.check]`, measures the reports and compares.
"""
