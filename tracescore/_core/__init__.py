"""Leaf utilities every room uses: errors, semantic-convention names, OpenTelemetry compatibility,
redaction, serialisation, counters (Stats), the background loop and the CPU pool."""
