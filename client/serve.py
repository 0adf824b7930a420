"""Starts the language server bundled in the extension with the interpreter that runs this file.

    python <extension>/client/serve.py [--tcp HOST:PORT]

The extension ships atenlens and its dependencies in <extension>/bundled/libs, so the user's
environment needs nothing but torch (and that only for tracing). This file is run as a script, so
sys.path[0] is its own folder, never the workspace: no file of the workspace shadows a module of the
server. PYTHONPATH carries the bundled folder on to the trace worker, which the server starts with
the same interpreter. Written for old interpreters too, so that they hear what is wrong.
"""

import os
import sys

if sys.version_info < (3, 11):
    sys.exit("atenlens needs Python 3.11 or newer; %s is Python %s" % (sys.executable, sys.version.split()[0]))

LIBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bundled", "libs")
sys.path[0] = LIBS
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (LIBS, os.environ.get("PYTHONPATH")) if p)

from atenlens.cli import main  # noqa: E402  (after the path is set)

# stdio is the default; some clients say so with --stdio
sys.exit(main(["serve", *[arg for arg in sys.argv[1:] if arg != "--stdio"]]))
