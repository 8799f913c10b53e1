"""`python -m fixpoint_server [--stdio | --tcp --host H --port P]`: start the language server."""

from fixpoint_server.commands.lsp import main

raise SystemExit(main())
