"""Offline work on data already recorded: reading Phoenix, re-scoring stored traces."""
