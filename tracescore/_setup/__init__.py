"""tracescore internals: setup."""
