"""The process boundary between atenlens and the user's code (docs/worker.md).

`client.TraceWorker` (torch-free) runs traces in a warm worker process (`python -m atenlens.worker`),
which forks a disposable child per trace.
"""
