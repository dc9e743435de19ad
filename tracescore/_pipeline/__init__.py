"""The pipeline: the runtime, the span processor, sampling and rules, the trace buffer, limits, the
engine and scoring jobs."""
