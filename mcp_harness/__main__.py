from mcp_harness.cli import main

raise SystemExit(main())
