"""Tool call accuracy, LLM variant: were the tools an agent called the right ones for the task?

Semantics follow the Mastra evals' LLM tool-call-accuracy scorer; prompts and code
are tracescore's own. The heuristic variant (expected tool names, no judge) lives in
``tool_call_accuracy_code`` and reports as ``tool-call-accuracy-code``, so that the two never
share a ``gen_ai.evaluation.name``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, Scorer, ScorerRun, check_scale
from tracescore.scorers._preset import explained, json_block, judge_scorer
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._text import plain_text

__all__ = ["create_tool_call_accuracy_scorer_llm", "normalise_available_tools"]

SCORER_ID = "tool-call-accuracy"

# Tool arguments and results can be large (documents, API payloads); the judge needs their gist.
_MAX_VALUE_CHARS = 2_000
# What a validation error quotes of the judge's own answer (the repair prompt echoes it).
_MAX_QUOTED_CHARS = 80
_MAX_QUOTED = 5


class ToolEvaluation(BaseModel):
    """One tool call's evaluation."""

    tool_called: str = Field(description="The name of the tool that was called.")
    was_appropriate: bool = Field(
        description="Whether calling this tool, with these arguments, served the request."
    )
    reasoning: str = Field(description="Why, in one sentence.")


class ToolEvaluations(BaseModel):
    """Analyze answer: one evaluation per tool call, in call order, and the tools not called."""

    evaluations: list[ToolEvaluation]
    missing_tools: list[str] = Field(
        description="Names of available tools the agent should have called but did not."
    )


_EVALUATIONS_INSTRUCTIONS = """\
You review the tool calls an AI agent made while handling a user's request, given the tools it \
had available.

For each tool call, in order, decide whether it was appropriate: the tool fits what the request \
needs at that point and its arguments are sensible for the request. A call is not appropriate \
when the tool is unrelated to the request, repeats an earlier call to no purpose, uses \
arguments that do not match the request, or names a tool that is not among the available tools.

Then list, by their exact names, the available tools the agent should have called to handle \
the request but did not (missing_tools); list none when the calls made were sufficient or no \
tool was needed.

Give exactly one evaluation per tool call, in call order, with tool_called set to that call's \
tool name and a one-sentence reasoning."""

_REASON_INSTRUCTIONS = """\
You explain a tool-call accuracy score to a developer reading it next to a trace, in two or \
three sentences. The score is the share of the agent's tool calls judged appropriate for the \
request; when the agent called no tool it is 1 if no tool was needed and 0 if some were \
missing. Name the calls or missing tools that lowered the score, based on the evaluations \
given. Do not repeat the formula."""


def normalise_available_tools(available_tools: Any) -> list[dict[str, Any]]:
    """The available tools as ``[{"name", "description"[, "parameters"]}]``.

    Args:
        available_tools: a non-empty list of tools, each a dict with ``name`` (or ``id``) and
            ``description`` and optional ``parameters``/``input_schema``; an OpenAI function
            tool ``{"type": "function", "function": {"name", "description", "parameters"}}``;
            or an object with ``name`` and ``description`` attributes.

    Returns:
        The tools, in the given order.

    Raises:
        ConfigurationError: not a non-empty list, a tool without a name, a non-string
            description, or two tools with the same name.

    Examples:
        >>> normalise_available_tools([{"type": "function", "function": {
        ...     "name": "get_weather", "description": "Weather for a city."}}])
        [{'name': 'get_weather', 'description': 'Weather for a city.'}]
    """
    usage = (
        "pass available_tools=[{'name': 'lookup_order', 'description': 'Find an order by id'}, "
        "...] (OpenAI function tools are accepted too)"
    )
    if available_tools is None:
        raise ConfigurationError(f"the LLM tool-call-accuracy scorer needs its tools: {usage}")
    if isinstance(available_tools, (str, bytes, Mapping)) or not isinstance(
        available_tools, Sequence
    ):
        raise ConfigurationError(
            f"available_tools must be a list, got {type(available_tools).__name__}: {usage}"
        )
    if not available_tools:
        raise ConfigurationError(f"available_tools is empty: {usage}")
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(available_tools):
        spec: Any = item
        if isinstance(item, Mapping) and isinstance(item.get("function"), Mapping):
            spec = item["function"]
        if isinstance(spec, Mapping):
            name = spec.get("name") or spec.get("id")
            description = spec.get("description", "")
            parameters = (
                spec.get("parameters") or spec.get("input_schema") or spec.get("inputSchema")
            )
        else:
            name = getattr(spec, "name", None)
            description = getattr(spec, "description", "")
            parameters = None
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"available_tools[{index}] has no name: {usage}")
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise ConfigurationError(
                f"available_tools[{index}] ({name!r}): description must be a string"
            )
        key = name.strip().lower()
        if key in seen:
            raise ConfigurationError(f"available_tools names {name!r} twice")
        seen.add(key)
        tool: dict[str, Any] = {"name": name.strip(), "description": description.strip()}
        if parameters:
            tool["parameters"] = parameters
        tools.append(tool)
    return tools


def _quoted(text: str) -> str:
    """``text`` as a short quoted string for an error message the judge reads back."""
    if len(text) > _MAX_QUOTED_CHARS:
        text = text[:_MAX_QUOTED_CHARS] + "..."
    return repr(text)


def _bounded_json(value: Any) -> Any:
    """``value`` as-is when its JSON is short, else its JSON text cut to a bounded length."""
    text = json.dumps(value, ensure_ascii=False, default=plain_text)
    if len(text) <= _MAX_VALUE_CHARS:
        return value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else text
    return text[:_MAX_VALUE_CHARS] + " ...(truncated)"


def _call_text(call: Mapping[str, Any]) -> str:
    shown = {
        "name": call["name"],
        "arguments": _bounded_json(call.get("arguments")),
        "result": _bounded_json(call.get("result")),
    }
    return json.dumps(shown, ensure_ascii=False, indent=1, default=plain_text)


def score(run: ScorerRun) -> float:
    """The share of appropriate calls, times the scale (no call: the scale, unless tools
    were missing)."""
    assert run.analyze_result is not None
    evaluations = run.analyze_result["evaluations"]
    if not evaluations:
        # Nothing called: right when nothing was needed.
        return 0.0 if run.analyze_result["missing_tools"] else run.scale
    appropriate = sum(1 for e in evaluations if e["was_appropriate"])
    return appropriate / len(evaluations) * run.scale


def reason_prompt(run: ScorerRun) -> str:
    """The reason step's prompt: the question, the evaluations and the score."""
    return explained(
        run,
        data_block("question", run.input_text),
        json_block("evaluations", run.analyze_result),
    )


def _steps(tools: list[dict[str, Any]]) -> tuple[
    Callable[[ScorerRun], dict[str, Any]], Callable[[ScorerRun], str],
    Callable[[ToolEvaluations, ScorerRun], None],
]:
    """The steps that read the available tools ``tools``: the called tools, the evaluations
    prompt and its check."""
    tool_names = {t["name"].lower() for t in tools}
    tools_text = [json.dumps(t, ensure_ascii=False, indent=1, default=plain_text) for t in tools]

    def calls_of(run: ScorerRun) -> list[dict[str, Any]]:
        return list(run.tool_calls or [])

    def preprocess(run: ScorerRun) -> dict[str, Any]:
        return {"tools_called": [c["name"] for c in calls_of(run)]}

    def evaluations_prompt(run: ScorerRun) -> str:
        calls = calls_of(run)
        parts = [
            data_block("question", run.input_text),
            data_blocks("available_tool", tools_text),
        ]
        if calls:
            parts.append(data_blocks("tool_call", [_call_text(c) for c in calls]))
        if run.output_text.strip():
            parts.append(data_block("answer", run.output_text))
        if calls:
            parts.append(
                f"The agent made the {len(calls)} tool calls above, in this order. Evaluate each "
                f"one: answer with exactly {len(calls)} evaluations, in the same order, then "
                "list any missing tools."
            )
        else:
            parts.append(
                "The agent called no tool. Answer with an empty evaluations list, and list the "
                "available tools it should have called (none if no tool was needed)."
            )
        return "\n\n".join(parts)

    def check_evaluations(parsed: ToolEvaluations, run: ScorerRun) -> None:
        calls = calls_of(run)
        if len(parsed.evaluations) != len(calls):
            raise ValueError(
                f"expected {len(calls)} evaluations, one per tool call in order, "
                f"got {len(parsed.evaluations)}"
            )
        for index, (evaluation, call) in enumerate(zip(parsed.evaluations, calls, strict=True)):
            if evaluation.tool_called.strip().lower() != call["name"].strip().lower():
                # The judge's value is quoted short; the repair prompt escapes the whole
                # message inside its <problem> element, so no quoted text can close it.
                raise ValueError(
                    f"evaluation {index} is for {_quoted(evaluation.tool_called)} but tool "
                    f"call {index} was to {_quoted(call['name'])}; keep the calls' order"
                )
        unknown = [m for m in parsed.missing_tools if m.strip().lower() not in tool_names]
        if unknown:
            raise ValueError(
                f"missing_tools may only name available tools "
                f"({', '.join(t['name'] for t in tools)}); got "
                f"{', '.join(_quoted(m) for m in unknown[:_MAX_QUOTED])}"
                f"{' and more' if len(unknown) > _MAX_QUOTED else ''}"
            )

    return preprocess, evaluations_prompt, check_evaluations


def create_tool_call_accuracy_scorer_llm(
    *,
    model: str | Judge | None = None,
    available_tools: Sequence[Any] | None = None,
    scale: float = 1,
) -> Scorer:
    """Score whether the tools an agent called were the right ones for the request (LLM judge).

    A preprocess step (no judge call) records the names of the tools called
    (``preprocess_step_result``: ``{"tools_called": [...]}``). Two judge calls: given the
    request, the available tools and each call (name, arguments, result), the judge marks each
    call appropriate or not and lists the available tools that should have been called but
    were not (``analyze_step_result``: ``{"evaluations": [{"tool_called", "was_appropriate",
    "reasoning"}], "missing_tools": [...]}``, one evaluation per call, in call order); then a
    reason is written.

    Score (from the Mastra evals' LLM tool-call-accuracy):
    ``appropriate / evaluated * scale``; when no call was evaluated (the agent called no tool),
    0 if the judge found missing tools, else ``scale``. Rounded to 2 decimals half up.

    Tool calls: ``run(tool_calls=[{"name", "arguments", "result"}, ...])``, else the OpenAI-style
    ``tool_calls`` of the assistant messages in ``output``. In a ``ScoringRule``, the calls made
    by the ``@tracescore.tool`` spans under the scored span, in call order (an empty list when
    there were none, which is scored too).

    Not scorable (no judge call): no tool-call information at all (``tool_calls`` not given and
    no message list as output), or an input without a question.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        available_tools: the tools the agent could call (required): dicts with ``name`` and
            ``description`` (optionally ``parameters``), OpenAI function tools, or objects with
            ``name``/``description`` attributes. See ``normalise_available_tools``.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``tool-call-accuracy``.

    Raises:
        ConfigurationError: ``available_tools`` is missing or malformed, ``scale`` is out of
            range, or ``model`` is invalid.

    Examples:
        >>> scorer = create_tool_call_accuracy_scorer_llm(model="openai/gpt-4o-mini",
        ...     available_tools=[{"name": "get_weather", "description": "Weather for a city"}])
        >>> scorer.run(input="Weather in Oslo?", output="It is 3 °C.", tool_calls=[
        ...     {"name": "get_weather", "arguments": {"city": "Oslo"}}]).score  # doctest: +SKIP
        1.0
    """
    tools = normalise_available_tools(available_tools)
    check_scale(scale)
    preprocess, evaluations_prompt, check_evaluations = _steps(tools)
    return judge_scorer(
        id=SCORER_ID,
        description="Whether the tools the agent called were appropriate for the request (LLM).",
        model=model,
        requires=("input", "tool_calls"),
        scale=scale,
        preprocess=preprocess,
        analyze=JudgePrompt(
            instructions=_EVALUATIONS_INSTRUCTIONS,
            prompt=evaluations_prompt,
            output_schema=ToolEvaluations,
            name="tool_call_accuracy_evaluations",
            validate=check_evaluations,
        ),
        generate_score=score,
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        options={"available_tools": tools, "scale": float(scale)},
    )
