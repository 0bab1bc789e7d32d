from tierlog.cli import main

raise SystemExit(main())
