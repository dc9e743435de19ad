"""Moved to ``tracescore.testing`` (``ScriptedJudge``); kept for the benchmarks' imports."""

from tracescore.testing import SCRIPTED_JUDGE_API_KEY as TEST_API_KEY
from tracescore.testing import Reply, make_judge, schema_name_of
from tracescore.testing import ScriptedJudge as JudgeServer

__all__ = ["TEST_API_KEY", "JudgeServer", "Reply", "make_judge", "schema_name_of"]
