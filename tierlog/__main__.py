from tierlog.cli.main import main

raise SystemExit(main())
