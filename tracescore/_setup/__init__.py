"""Set-up: configure() and its options, environment variables, signal and exit hooks, the first-run
console."""
