from modelplane.cli import main

raise SystemExit(main())
