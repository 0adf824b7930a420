import os
import sys

from atenlens.worker.main import main

code = main()
# Leave at once, as the trace children do: the client waits for this exit (a server exiting at the
# editor's `exit` among them), and a full interpreter shutdown with torch loaded takes a while.
for stream in (sys.stdout, sys.stderr):
    stream.flush()
os._exit(code)
