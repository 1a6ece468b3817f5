"""``python -m cli ARGS`` is ``moo ARGS`` (for a checkout without the console script)."""

from cli.main import main

raise SystemExit(main())
