import os
import sys

from atenlens.startpath import leave_start_directory

# started with -P (worker/client.py); without it, still no module of the current directory loads
problem = leave_start_directory()
if problem:
    print(problem, file=sys.stderr)
    sys.stderr.flush()
    os._exit(2)

from atenlens.worker.main import main  # noqa: E402

code = main()
# Leave at once, as the trace children do: the client waits for this exit (a server exiting at the
# editor's `exit` among them), and a full interpreter shutdown with torch loaded takes a while.
for stream in (sys.stdout, sys.stderr):
    stream.flush()
os._exit(code)
