"""The tracescore command: one module per subcommand; the public front is tracescore.cli."""
