import sys

from atenlens.startpath import leave_start_directory

# before anything else is imported: no module of the current directory (the workspace) may load
problem = leave_start_directory()
if problem:
    print(problem, file=sys.stderr)
    raise SystemExit(2)

from atenlens.cli import main  # noqa: E402

raise SystemExit(main())
