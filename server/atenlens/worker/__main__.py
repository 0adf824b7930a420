import sys

from atenlens.worker.main import main

sys.exit(main())
