"""Instrumentation: the decorators, blocks and conversation context that make spans in user code,
and the usage and cost read from model responses."""
