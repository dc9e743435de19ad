"""The package version: the one place it is written (``pyproject.toml`` reads it at build time
through hatchling's ``[tool.hatch.version]``; ``tracescore.__version__`` and
``tracescore --version`` print it)."""

__version__ = "0.1.0"
