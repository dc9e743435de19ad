"""``python -m tracescore ...``: the same as the ``tracescore`` command."""

from tracescore.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
