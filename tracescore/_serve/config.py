"""The service's configuration file: YAML or TOML, environment references, validated by pydantic.

A file is read as TOML when its name ends in ``.toml`` (stdlib ``tomllib``; ``tomli`` on Python
3.10), else as YAML (PyYAML, from the ``serve`` extra). Before parsing, ``${NAME}`` and
``${NAME:-default}`` are replaced by the environment variable's value (``$$`` is a literal
``$``), as the OpenTelemetry Collector's configuration does; an unset variable without a
default is an error that names it. Every field is checked and unknown fields are refused, so a
typo is reported instead of ignored; ``ServeConfigError`` lists each bad field by its path
(``rules[0]: ScoringRule(sample_rate=2) ...``).

The sections ``limits``, ``export`` and ``redaction`` validate into the very classes
``configure()`` takes (``tracescore.LimitsOptions``, ``ExportOptions``, ``RedactionOptions``),
with the same environment variables and defaults, all read from the option table
(``tracescore._setup.options``); the few service defaults that differ (three export fields and
``limits.flush_timeout``) are declared there too, and the fields the table marks in process
only (``export.flush_on_sigterm``, ``redaction.callback``) are refused with a message that says
so.
A rule is a ``tracescore.ScoringRule`` whose scorer is named (``scorer``/``factory`` and
``options``); its other keys are ``ScoringRule``'s own, checked by it. The older section
names (``scoring`` for ``limits``, ``limits`` for the Redis settings now under ``fleet``,
``export.redact`` for ``redaction.foreign_spans``, ``shutdown_timeout`` for
``limits.flush_timeout``, ``downstream`` for ``exporter``) are read for one more release with a
``DeprecationWarning``.

Example (YAML)::

    exporter: {endpoint: "http://backend:4317", protocol: grpc}
    judge: {model: "openai/gpt-4o-mini", api_key: "${OPENAI_API_KEY}"}
    rules:
      - scorer: faithfulness
        on: agent
        sample_rate: 0.1
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tracescore._core.errors import ConfigurationError
from tracescore._pipeline.rules import ScoringRule
from tracescore._setup import env as _env
from tracescore._setup import options as _options
from tracescore._setup.options import ExportOptions, LimitsOptions, RedactionOptions

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
MIB = 1024 * 1024


class ServeConfigError(ConfigurationError):
    """The service's configuration file is missing, unreadable or invalid; the message lists
    every problem, one per line."""


#: The largest value of each numeric field of the file, by section and field
#: (docs/configuration.md, "Maxima"); past it a value warns once and the maximum applies. The
#: ``limits`` and ``export`` sections take the maxima of their option groups.
SERVE_MAXIMA: dict[str, float] = {
    # gRPC's own limit is 2 GiB - 1; a request held whole in memory stays well below it.
    "receivers.max_request_bytes": 1024 * MIB,
    "receivers.grpc_workers": 1_024,
    "receivers.header_timeout": 3_600.0,
    "receivers.body_timeout": 3_600.0,
    "receivers.idle_timeout": 86_400.0,
    "receivers.backlog": 65_535,
    "exporter.timeout": 3_600.0,
    "trace.idle": 3_600.0,
    "trace.settle_after_root": 3_600.0,
    "trace.max_wait": 86_400.0,
    "trace.max_bytes": 16 * 1024 * MIB,
    "trace.max_bytes_per_trace": 1024 * MIB,
    "trace.max_traces": 10_000_000,
    "backpressure.retry_after": 3_600.0,
    "fleet.lease_seconds": 3_600.0,
    "fleet.refresh_interval": 3_600.0,
    "metrics_interval": 86_400.0,
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    #: The section's name in the file, for ``SERVE_MAXIMA`` ("" for the top level).
    _section: ClassVar[str | None] = None

    @model_validator(mode="after")
    def _bounded(self) -> Any:
        section = type(self)._section
        if section is None:
            return self
        for name in type(self).model_fields:
            key = f"{section}.{name}" if section else name
            maximum = SERVE_MAXIMA.get(key)
            value = getattr(self, name)
            if maximum is not None and isinstance(value, (int, float)):
                object.__setattr__(self, name, _env.clamp(key, value, maximum))
        return self


class Listen(_Model):
    """One listening socket: ``host:port`` (port 0 picks a free one)."""

    endpoint: str

    @field_validator("endpoint")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise ValueError("expected host:port, e.g. 0.0.0.0:4317")
        return value

    @property
    def host(self) -> str:
        """The host part."""
        return self.endpoint.rpartition(":")[0]

    @property
    def port(self) -> int:
        """The port part."""
        return int(self.endpoint.rpartition(":")[2])


# -- receivers at the network edge (TLS, auth, limits) -----------------------------------------
class Tls(_Model):
    """TLS of both receivers (PEM files). With ``client_ca_file`` every client must present a
    certificate that CA signed (mutual TLS)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None


class Auth(_Model):
    """Bearer-token authentication of both receivers, as the Collector's ``bearertokenauth``
    extension sends it (``authorization: Bearer <token>``): give ``token`` (usually
    ``"${TRACESCORE_SERVE_TOKEN}"``) or ``token_file`` (read at start, whitespace stripped)."""

    token: str | None = None
    token_file: str | None = None

    def model_post_init(self, __context: Any) -> None:
        if (self.token is None) == (self.token_file is None):
            raise ValueError("give exactly one of token or token_file")
        if self.token is not None and not self.token.strip():
            raise ValueError("token is empty (an unset environment variable?)")


class Receivers(_Model):
    """Where OTLP comes in; None turns a protocol off. Loopback unless an address is given.

    ``admin`` (``/healthz``, ``/readyz``, ``/stats``, ``/metrics``) gets a port of its own,
    without TLS or auth, for probes and scrapers; without it those paths are answered on the
    HTTP receiver, behind its TLS and auth. ``max_request_bytes`` bounds a request both as
    received and decompressed.
    """

    _section: ClassVar[str | None] = "receivers"

    grpc: Listen | None = Listen(endpoint="127.0.0.1:4317")
    http: Listen | None = Listen(endpoint="127.0.0.1:4318")
    admin: Listen | None = None
    tls: Tls | None = None
    auth: Auth | None = None
    max_request_bytes: int = Field(default=16 * MIB, gt=0)
    grpc_workers: int = Field(default=8, gt=0)
    header_timeout: float = Field(default=10.0, gt=0)
    body_timeout: float = Field(default=30.0, gt=0)
    idle_timeout: float = Field(default=60.0, gt=0)
    backlog: int = Field(default=1024, gt=0)


class Downstream(_Model):
    """The ``exporter`` section: the OTLP endpoint everything is forwarded to (spans, logs,
    scores, metrics), as ``configure(exporter=...)`` is where an application's spans go.
    Without the section, ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_EXPORTER_OTLP_PROTOCOL``
    give it, as they give ``configure()`` its default exporter."""

    _section: ClassVar[str | None] = "exporter"

    endpoint: str
    protocol: Literal["grpc", "http/protobuf"] = "grpc"
    headers: dict[str, str] = {}
    timeout: float = Field(default=10.0, gt=0)
    compression: Literal["gzip", "none"] = "gzip"
    insecure: bool = True

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL, e.g. http://backend:4317")
        return value.rstrip("/")


class Judge(_Model):
    """The default judge of every rule: a litellm model string and what litellm accepts
    (``api_base``, ``api_key``, ``timeout``, ...)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    model: str


class Rule(_Model):
    """One ``ScoringRule`` whose scorer is named: ``scorer`` is a scorer id (``tracescore
    scorers`` lists them) built with ``options``; ``factory`` (``module:callable``) builds a
    custom scorer instead and gets ``options`` as keyword arguments. Every other key is one of
    ``ScoringRule``'s (``on``, ``sample_rate``, ``threshold``, ``name``, ``span_name``,
    ``attributes``, ``scope``, ``score_errors``, ``ground_truth``, ``inputs``,
    ``max_per_minute``, ``max_tokens_per_hour``, ``max_cost_per_hour``), checked by it; span-bound
    values (``ground_truth``, ``inputs``) are span attribute names: a file cannot hold
    callables."""

    model_config = ConfigDict(extra="allow", frozen=True)

    scorer: str | None = None
    factory: str | None = None
    options: dict[str, Any] = {}

    @field_validator("factory")
    @classmethod
    def _factory(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+:[\w.]+", value):
            raise ValueError("expected module:callable, e.g. mypackage.scorers:make_scorer")
        return value

    def model_post_init(self, __context: Any) -> None:
        if (self.scorer is None) == (self.factory is None):
            raise ValueError("give exactly one of scorer (an id) or factory (module:callable)")
        self.to_rule(_Named(self.scorer or self.factory or ""))  # checks the rule's own keys

    @property
    def fields(self) -> dict[str, Any]:
        """The rule's ``ScoringRule`` keys as given."""
        return dict(self.model_extra or {})

    def to_rule(self, scorer: Any) -> ScoringRule:
        """The ``ScoringRule`` of ``scorer`` with this rule's keys.

        Raises:
            ValueError: a key is unknown, or ``ScoringRule`` refuses a value.
        """
        try:
            return ScoringRule(scorer=scorer, **self.fields)
        except TypeError as exc:  # an unknown key
            raise ValueError(str(exc).replace("ScoringRule.__init__()", "a rule")) from None


class _Named:
    """Stands for a rule's scorer while the file's rule keys are checked."""

    requires_ground_truth = False
    run_inputs = ()

    def __init__(self, scorer_id: str) -> None:
        self.id = scorer_id or "scorer"

    async def arun(self, **kwargs: Any) -> Any:  # pragma: no cover - never run
        raise NotImplementedError


class Trace(_Model):
    """Trace completeness (``settle.TraceSettler``): a scored span whose scorer needs the
    trace's documents or tool calls waits until its trace is complete."""

    _section: ClassVar[str | None] = "trace"

    # Above the shipped Collector's longest retry gap (max_interval 2 s, +50 % jitter: 3 s) and
    # a sender's export interval: docs/serve.md, "Completeness and the Collector's retries".
    idle: float = Field(default=6.0, gt=0)
    settle_after_root: float = Field(default=4.0, ge=0)
    max_wait: float = Field(default=30.0, gt=0)
    max_bytes: int = Field(default=64 * MIB, gt=0)
    max_bytes_per_trace: int = Field(default=4 * MIB, gt=0)
    max_traces: int = Field(default=100_000, gt=0)


class Backpressure(_Model):
    """When requests are refused with RESOURCE_EXHAUSTED / HTTP 429 (``admission``)."""

    _section: ClassVar[str | None] = "backpressure"

    high_water: float = Field(default=0.5, gt=0, le=1)
    retry_after: float = Field(default=1.0, gt=0)


class Fleet(_Model):
    """Fleet-wide rate limits and budgets (``tracescore._pipeline.limits_redis``); without
    ``redis_url`` every replica keeps its own."""

    _section: ClassVar[str | None] = "fleet"

    redis_url: str | None = None
    key_prefix: str = "tracescore"
    lease_seconds: float = Field(default=0.25, gt=0)
    refresh_interval: float = Field(default=0.5, gt=0)

    @field_validator("redis_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if not value:
            return None  # "${TRACESCORE_REDIS_URL:-}" unset: per-replica limits
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("expected a redis://, rediss:// or unix:// URL")
        return value


class ServeConfig(_Model):
    """The whole file.

    ``mode``: ``hold`` keeps a scored span until its scores are attached (one span, scores on
    it; a crash loses what is held); ``forward_first`` forwards every span at once and answers
    a request only once its spans were handed downstream, the scores following on carrier
    spans and log records (a crash loses at most the scores in flight).
    """

    _section: ClassVar[str | None] = ""

    service_name: str | None = None
    mode: Literal["hold", "forward_first"] = "hold"
    exporter: Downstream
    receivers: Receivers = Receivers()
    judge: Judge | None = None
    rules: list[Rule] = []
    limits: LimitsOptions = LimitsOptions()
    trace: Trace = Trace()
    export: ExportOptions = ExportOptions()
    redaction: RedactionOptions = RedactionOptions()
    backpressure: Backpressure = Backpressure()
    fleet: Fleet = Fleet()
    metrics_interval: float = Field(default=10.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _in_process_only(cls, data: Any) -> Any:
        # The option table marks what a file cannot mean (a function, the SIGTERM handler of an
        # application): refused by name rather than silently ignored.
        if isinstance(data, dict):
            if "exporter" not in data:
                exporter = _exporter_from_env()
                if exporter is None:
                    raise ValueError("no exporter: give 'exporter: {endpoint: ...}' (where "
                                     "everything is forwarded) or set OTEL_EXPORTER_OTLP_ENDPOINT")
                data = {**data, "exporter": exporter}
            for entry in _options.table():
                section = data.get(entry.group)
                if not entry.serve and isinstance(section, dict) and entry.name in section:
                    raise ValueError(f"{entry.group}.{entry.name} is an option of configure() "
                                     "in an application only; the service does not take it")
        return data

    @model_validator(mode="after")
    def _resolved(self) -> ServeConfig:
        # The None fields take the environment's values, else the option table's defaults (the
        # service's own where the table gives one), once, here.
        object.__setattr__(self, "limits", self.limits.resolve(serve=True))
        object.__setattr__(self, "export", self.export.resolve(serve=True))
        object.__setattr__(self, "redaction", self.redaction.resolve(serve=True))
        if self.service_name is None:
            (entry,) = (e for e in _options.TOP_LEVEL if e.name == "service_name")
            object.__setattr__(self, "service_name", entry.from_env(serve=True))
        return self

    @property
    def downstream(self) -> Downstream:
        """The ``exporter`` section (``downstream:`` in a file is its older name)."""
        return self.exporter

    @property
    def shutdown_timeout(self) -> float:
        """The drain's deadline at SIGTERM in seconds: ``limits.flush_timeout`` (the name
        ``configure()`` has for it; ``shutdown_timeout:`` in a file is its older name)."""
        return float(self.limits.flush_timeout or 0)

    @property
    def scoring(self) -> LimitsOptions:
        """The resolved ``limits`` (admission reads the queue and held-span bounds here)."""
        return self.limits


def _exporter_from_env() -> dict[str, Any] | None:
    """The ``exporter`` section a file without one gets: the endpoint and protocol of
    ``configure()``'s default exporter (``OTEL_EXPORTER_OTLP_ENDPOINT``, the base URL every
    signal goes to; ``OTEL_EXPORTER_OTLP_PROTOCOL``, else the service's gRPC), or None."""
    endpoint = _env.read_str(_env.OTEL_EXPORTER_OTLP_ENDPOINT)
    if endpoint is None:
        return None
    protocol = _env.read_enum(_env.OTEL_EXPORTER_OTLP_PROTOCOL, _env.OTLP_PROTOCOLS, "grpc")
    return {"endpoint": endpoint, "protocol": protocol}


def expand(text: str) -> str:
    """Replace ``${NAME}``/``${NAME:-default}`` with environment values; ``$$`` is ``$``.

    Raises:
        ServeConfigError: a variable without a default is unset.
    """
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        found = _env.read_str(name)
        if found is not None:
            return found
        if default is not None:
            return default
        missing.append(name)
        return ""

    out = _REFERENCE.sub(value, text)
    if missing:
        raise ServeConfigError(
            "the configuration refers to unset environment variables: " + ", ".join(missing)
            + " (set them, or write ${NAME:-default})")
    return out


def parse(text: str, *, toml: bool) -> ServeConfig:
    """Validate a configuration document.

    Args:
        text: the file's text (environment references not yet expanded).
        toml: parse as TOML, else YAML.

    Raises:
        ServeConfigError: bad syntax, a missing YAML library or invalid fields.
    """
    expanded = expand(text)
    if toml:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            data: Any = tomllib.loads(expanded)
        except tomllib.TOMLDecodeError as exc:
            raise ServeConfigError(f"invalid TOML: {exc}") from None
    else:
        try:
            import yaml  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            raise ServeConfigError(
                "YAML configuration needs PyYAML: pip install 'PyYAML>=6,<7' (part of "
                "tracescore's 'serve' extra), or write the file as .toml") from None
        try:
            data = yaml.safe_load(expanded)
        except yaml.YAMLError as exc:
            raise ServeConfigError(f"invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ServeConfigError("the configuration must be a mapping of sections "
                               "(exporter, rules, ...)")
    if not toml:
        _yaml_on(data)
    _older_sections(data)
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as exc:
        raise ServeConfigError(_problems(exc)) from None


def load(path: str | Path) -> ServeConfig:
    """Read and validate a configuration file (``.toml`` as TOML, anything else as YAML).

    Raises:
        ServeConfigError: the file cannot be read or is invalid (every bad field listed).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ServeConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return parse(text, toml=path.suffix.lower() == ".toml")
    except ServeConfigError as exc:
        raise ServeConfigError(f"{path}: {exc}") from None


_FLEET_KEYS = ("redis_url", "key_prefix", "lease_seconds", "refresh_interval")


def _older_sections(data: dict[str, Any]) -> None:
    """Read the section names of the previous release, with a ``DeprecationWarning``:
    ``scoring`` is now ``limits``, the Redis keys of ``limits`` are now ``fleet``,
    ``export.redact`` is ``redaction.foreign_spans``, ``shutdown_timeout`` is
    ``limits.flush_timeout`` and ``downstream`` is ``exporter``."""
    limits = data.get("limits")
    if isinstance(limits, dict) and any(key in limits for key in _FLEET_KEYS):
        warnings.warn("tracescore serve: the Redis settings moved from 'limits:' to 'fleet:' "
                      "(docs/configuration.md)", DeprecationWarning, stacklevel=4)
        data["fleet"] = {**data.get("fleet", {}), **limits}
        del data["limits"]
    export = data.get("export")
    if isinstance(export, dict) and "redact" in export:
        warnings.warn("tracescore serve: 'export: {redact: ...}' is now "
                      "'redaction: {foreign_spans: ...}' (docs/configuration.md)",
                      DeprecationWarning, stacklevel=4)
        redaction = data.setdefault("redaction", {})
        if isinstance(redaction, dict):
            redaction.setdefault("foreign_spans", export.pop("redact"))
    if "downstream" in data:
        warnings.warn("tracescore serve: 'downstream:' is now 'exporter:', the name configure() "
                      "has for where spans go (docs/configuration.md)", DeprecationWarning,
                      stacklevel=4)
        data.setdefault("exporter", data.pop("downstream"))
        data.pop("downstream", None)
    if "shutdown_timeout" in data:
        warnings.warn("tracescore serve: 'shutdown_timeout:' is now 'limits: {flush_timeout: "
                      "...}', the name configure() has for it (docs/configuration.md)",
                      DeprecationWarning, stacklevel=4)
        timeout = data.pop("shutdown_timeout")
        limits = data.setdefault("limits", {})
        if isinstance(limits, dict):
            limits.setdefault("flush_timeout", timeout)
    if "scoring" in data:
        warnings.warn("tracescore serve: the 'scoring:' section is now 'limits:' "
                      "(docs/configuration.md)", DeprecationWarning, stacklevel=4)
        scoring = data.pop("scoring")
        if isinstance(scoring, dict) and isinstance(data.get("limits", {}), dict):
            data["limits"] = {**scoring, **data.get("limits", {})}
        else:
            data["limits"] = scoring


def _yaml_on(data: dict[str, Any]) -> None:
    """YAML 1.1 (PyYAML) reads the key ``on`` as the boolean true: give rules their ``on``."""
    rules = data.get("rules")
    if isinstance(rules, list):
        for rule in rules:
            if isinstance(rule, dict) and True in rule and "on" not in rule:
                rule["on"] = rule.pop(True)


def _problems(exc: ValidationError) -> str:
    lines = [f"{exc.error_count()} invalid field(s):"]
    for error in exc.errors():
        where = ""
        for part in error["loc"]:
            where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else part)
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"  {where or '(top level)'}: {message}")
    return "\n".join(lines)
