"""``python -m tracescore ...``: the same as the ``tracescore`` command."""

from tracescore._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
