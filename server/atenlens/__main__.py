from atenlens.cli import main

raise SystemExit(main())
