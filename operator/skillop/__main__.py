"""``python -m skillop``: the ``skillop`` command, for environments without the
console script on PATH (a bare venv, ``pipx run``, a container's entry point)."""

from skillop.cli.main import main

raise SystemExit(main())
