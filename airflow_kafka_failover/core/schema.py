"""The base of the provider's typed models and the field types they share, with the project's messages.

Pure module (pydantic only, no Airflow, no I/O): the pair config, the job's options, the job settings file
and the health thresholds are built from it. Each field type checks its value *before* pydantic converts
it, so a bad value is reported as the project always reported it (``must be a number >= 0.1, got 'soon'``)
and nothing is converted silently (YAML ``true`` does not become ``"True"``, ``"3"`` does not become 3).

:func:`problem_of` turns the first error of a :class:`pydantic.ValidationError` into a dotted field name
and a sentence saying what is wrong; callers prefix the file and the pair.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_E = TypeVar("_E", bound=StrEnum)


class FieldProblem(ValueError):
    """A problem found by a check across fields, reported at ``field`` (dotted, relative to the model).

    :param field: where the problem is, e.g. ``clusters.A.alias``.
    :param problem: what is wrong and what to do.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


_ANNOTATIONS = ("title", "description", "default", "x-default")


def _as_a_file_gives_it(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """The JSON Schema of a section as a file gives it.

    Fields filled from the enclosing key (``exclude=True``) are dropped; fields with a derived default
    (``_null_means_default``) also accept ``null``.
    """
    properties = schema.get("properties", {})
    for name, info in model.model_fields.items():
        if info.exclude:
            properties.pop(name, None)
            if name in schema.get("required", []):
                schema["required"].remove(name)
    for name in getattr(model, "_null_means_default", ()):
        field = properties.get(name)
        if field is None or {"type": "null"} in field.get("anyOf", []):
            continue
        value = {key: item for key, item in field.items() if key not in _ANNOTATIONS}
        notes = {key: item for key, item in field.items() if key in _ANNOTATIONS}
        properties[name] = {"anyOf": [value, {"type": "null"}], **notes}


class Schema(BaseModel):
    """A typed section of a file: frozen, unknown keys refused by name, ``null`` read as an empty section.

    Fields named in ``_null_means_default`` have a default derived from other fields (filled in by a
    validator); an explicit ``null`` in the file means that default.
    """

    _null_means_default: ClassVar[tuple[str, ...]] = ()

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_as_a_file_gives_it)

    @classmethod
    def known_keys(cls) -> list[str]:
        """The keys a file may give for this section."""
        return [name for name, info in cls.model_fields.items() if not info.exclude]

    @model_validator(mode="before")
    @classmethod
    def _a_mapping_of_known_keys(cls, data: Any) -> Any:
        if data is None:
            return {}
        if isinstance(data, BaseModel):
            return data
        if not isinstance(data, Mapping):
            raise ValueError(f"must be a mapping, got {type(data).__name__} {data!r}")
        known = cls.known_keys()
        # Excluded fields (a pair's or a cluster's name) are filled from the enclosing key, not the file.
        unknown = sorted(str(key) for key in data if key not in cls.model_fields)
        if unknown:
            raise ValueError(f"unknown key(s) {unknown}; known keys are {known}")
        derived = cls._null_means_default
        return {key: value for key, value in data.items() if not (key in derived and value is None)}


def problem_of(error: ValidationError) -> tuple[str, str]:
    """The dotted field and the problem of ``error``'s first error (pydantic lists them in field order)."""
    first = error.errors(include_url=False)[0]
    where = [str(part) for part in first["loc"]]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldProblem):
        where += [part for part in cause.field.split(".") if part]
        return ".".join(where), cause.problem
    if isinstance(cause, BaseException):
        return ".".join(where), str(cause)
    if first["type"] == "missing":
        return ".".join(where), "is required"
    return ".".join(where), f"{first['msg']}, got {first['input']!r}"


def _number(minimum: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise ValueError(f"must be a number >= {minimum:g}, got {value!r}")
        # NaN compares false with everything (it would pass `< minimum`) and inf never ends a wait.
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number >= {minimum:g} of seconds, got {value!r}")
        return float(value)

    return check


def _text(value: Any) -> str:
    if value is None:
        raise ValueError("is required")
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be an integer >= 1 or left out, got {value!r}")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _yaml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _options(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping, got {type(value).__name__} {value!r}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"option names are strings, got {key!r}; quote it")
        if not isinstance(item, str):
            raise ValueError(
                f"option {key!r} is the YAML {type(item).__name__} {item!r}, not a string; quote it so the "
                f'client receives exactly that text, e.g. {key}: "{_yaml_text(item)}"'
            )
    return dict(value)


def _local_path(value: Any) -> str:
    text: str = _text(value)
    url = _URL.match(text.strip())
    if url:
        raise ValueError(
            f"{text!r} is a URL ({url.group(1)}://); this option takes a local path (a mounted volume works)"
        )
    return text


def _storage_location(value: Any) -> str:
    from airflow_kafka_failover.core.storage.locations import check_location

    return check_location(_text(value))


def choice(enum: type[_E], allowed: tuple[_E, ...] | None = None) -> BeforeValidator:
    """A check that the value is one of ``enum``'s values, named in the message as the file spells them.

    :param enum: the enum.
    :param allowed: the members a file may name, when not all (default: all).
    """
    values = [member.value for member in (allowed or tuple(enum))]

    def check(value: Any) -> _E:
        if isinstance(value, enum) and value.value in values:
            return value
        if isinstance(value, enum):
            value = value.value
        if not isinstance(value, str) or value not in values:
            raise ValueError(f"{value!r} is not one of {values}")
        return enum(value)

    return BeforeValidator(check)


Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False), BeforeValidator(_number(0.0))]
"""A finite number of seconds >= 0."""
JobSeconds = Annotated[float, Field(ge=0.1, allow_inf_nan=False), BeforeValidator(_number(0.1))]
"""A finite number of seconds >= 0.1 (a wait or an interval of the job)."""
LongSeconds = Annotated[float, Field(ge=1, allow_inf_nan=False), BeforeValidator(_number(1.0))]
"""A finite number of seconds >= 1."""
Text = Annotated[str, Field(min_length=1), BeforeValidator(_text)]
"""A non-empty string."""
Count = Annotated[int, Field(ge=1), BeforeValidator(_count)]
"""An integer >= 1."""
Flag = Annotated[bool, BeforeValidator(_flag)]
"""``true`` or ``false`` (not ``"yes"``, not 1)."""
Options = Annotated[dict[str, str], BeforeValidator(_options)]
"""Option names to string values; YAML booleans and numbers are refused (quote them)."""
LocalPath = Annotated[
    str,
    BeforeValidator(_local_path),
    WithJsonSchema({"type": "string", "minLength": 1, "pattern": "^(?![A-Za-z][A-Za-z0-9+.-]*://)"}),
]
"""A local file system path; ``scheme://`` URLs are refused."""
StorageLocation = Annotated[
    str,
    BeforeValidator(_storage_location),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "pattern": "^((hdfs|s3a|gs|abfs|abfss|file)://|(?![A-Za-z][A-Za-z0-9+.-]*://))",
        }
    ),
]
"""A local path or the URI of a supported store (``hdfs://``, ``s3a://``; ``gs://``, ``abfs(s)://``
untested)."""
