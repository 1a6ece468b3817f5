from moo.cli import main

raise SystemExit(main())
