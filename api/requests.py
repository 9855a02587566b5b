"""Turning an HTTP body into validated domain objects, with the contract's errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

import pydantic_core
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from ports.errors import BlackboxError, InvalidField, InvalidJson, MissingField, PayloadTooLarge, UnsupportedMediaType
from ports.limits import MAX_BODY_BYTES, MAX_JSON_DEPTH, PATTERN_WORDS, check_json, check_json_values

# requests one `blackbox serve` API process holds in its handlers (running or waiting for a thread)
# before it answers 503 with Retry-After instead of queueing: room for bursts of a few hundred
# concurrent clients, not for a queue of seconds
MAX_IN_FLIGHT = 512
# RFC 8259 lets a parser ignore it; clients that write one should not lose their reports
UTF8_BOM = b"\xef\xbb\xbf"

M = TypeVar("M", bound=BaseModel)

# pydantic puts the union member it tried into an error's loc; those are not field names
_UNION_TAGS = {"str", "int", "none", "bool", "float", "list", "dict"}
_SHOULD = "Input should be "


@dataclass(frozen=True)
class Posted:
    """A POST as capture sees it."""

    body: bytes
    content_type: str | None = None
    idempotency_key: str | None = None
    content_encoding: str | None = None
    """Every line of the header, joined: a coding stacked on another line is one more."""

    @property
    def json_text(self) -> bytes:
        """The body as the JSON text it holds, without a byte order mark."""
        return self.body.removeprefix(UTF8_BOM)

    def json(self) -> Any:
        return parse_json_body(self.body, self.content_type)


def parse_json_body(body: bytes, content_type: str | None, max_bytes: int = MAX_BODY_BYTES) -> Any:
    """`content_type` None is a body from no HTTP request (a test, a tool); at the HTTP edge a body
    without one is refused before it gets here (api.resolver.posted)."""
    if content_type is not None:
        media_type = content_type.split(";", 1)[0].strip().lower()
        if media_type != "application/json" and not media_type.endswith("+json"):
            raise UnsupportedMediaType(f"expected application/json, got {media_type or 'nothing'}")
    # the limit is on the body as sent, byte order mark and all: the local gateway stops reading there
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"body is {len(body)} bytes; the limit is {max_bytes}")
    body = body.removeprefix(UTF8_BOM)
    check_json_values(body)
    # strict JSON, as the consumers parse it again: UTF-8 only, no NaN or Infinity, no lone
    # surrogates (json.loads took all three, and a report then failed later or changed on the way)
    try:
        parsed = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            raise InvalidField(f"JSON nests deeper than {MAX_JSON_DEPTH} levels", "body") from None
        raise InvalidJson(f"body is not valid JSON: {exc}") from None
    check_json(parsed)
    return parsed


def field_path(loc: tuple[int | str, ...]) -> str:
    """('attachments', 'a.png') → 'attachments.a.png'; (3, 'sku') → '[3].sku'."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def validation_error(exc: ValidationError, prefix: tuple[int | str, ...] = ()) -> BlackboxError:
    errors = exc.errors()
    field = _field(errors[0])
    # a field of either type (a union) has an error for each, all of which the client should read
    either = [e for e in errors if _field(e) == field] if _field(errors[0], keep_members=True) != field else []
    return contract_error(errors[0], prefix, either)


def _field(error: Mapping[str, Any], keep_members: bool = False) -> tuple[int | str, ...]:
    """An error's place, without the union members' and validators' tags pydantic adds to it."""
    raw_loc = tuple(error["loc"])
    if "[key]" in raw_loc:  # a bad dict key (an attachment name): the field is the dict itself
        raw_loc = raw_loc[: raw_loc.index("[key]") - 1]
    return tuple(p for p in raw_loc if keep_members or isinstance(p, int)
                 or not (p in _UNION_TAGS or p.startswith(("function-", "constrained-"))))


def contract_error(first: Mapping[str, Any], prefix: tuple[int | str, ...] = (),
                   either: Sequence[Mapping[str, Any]] = ()) -> BlackboxError:
    """A pydantic error (the first of a validation) as the contract's 400, naming the field; with
    `either`, the errors of each type a union field may be, said in one sentence."""
    path = field_path(prefix + _field(first)) or "body"
    if first["type"] == "missing":
        return MissingField(f"{path} is required", path)
    if len(either) > 1:
        first_said, *others = dict.fromkeys(e["msg"] for e in either)
        return InvalidField(f"{path}: {' or '.join([first_said, *(m.removeprefix(_SHOULD) for m in others)])}", path)
    # a pattern in words where this API has them (ports.limits.PATTERN_WORDS)
    pattern = first.get("ctx", {}).get("pattern") if first["type"] == "string_pattern_mismatch" else None
    return InvalidField(f"{path}: {PATTERN_WORDS.get(pattern or '', first['msg'])}", path)


def validate(model: type[M], data: Any, prefix: tuple[int | str, ...] = ()) -> M:
    if not isinstance(data, dict):
        raise InvalidField("expected a JSON object", field_path(prefix) or "body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, prefix) from None


def validate_batch(model: type[M], data: Any, max_batch: int) -> list[M]:
    """One object, or an array of at most `max_batch`; errors name the item, e.g. `[3].sku`."""
    if not isinstance(data, list):
        return [validate(model, data)]
    if len(data) > max_batch:
        raise InvalidField(f"a batch holds at most {max_batch} items, got {len(data)}", "body")
    return [validate(model, item, (i,)) for i, item in enumerate(data)]


# where a schema's named parts go in the OpenAPI document (api.document gathers them there)
SCHEMA_REF = "#/components/schemas/{model}"
BODY_EXTENSION = "x-body"


@dataclass(frozen=True)
class JsonBody(Generic[M]):
    """A route's JSON body: one `model`, or with `batch`, also an array of up to that many. The
    route parses its POST with it, and declares it with `openapi`, so the document says what the
    route takes from the same object that checks it."""

    model: type[M]
    batch: int | None = None

    def one(self, posted: Posted) -> M:
        return validate(self.model, posted.json())

    def many(self, posted: Posted) -> list[M]:
        if self.batch is None:
            raise TypeError(f"a {self.model.__name__} body is one object, never a batch")
        return validate_batch(self.model, posted.json(), self.batch)

    @property
    def openapi(self) -> dict[str, Any]:
        """The route's body, for its decorator's `openapi_extensions`: api.document makes it the
        operation's requestBody, and moves the models' schemas in `$defs` to the components. (Not
        the requestBody itself: Powertools' model of one holds numbers as floats, and 2**63 - 1 is
        not a float.)"""
        model = self.model.model_json_schema(ref_template=SCHEMA_REF)
        defs = {**model.pop("$defs", {}), self.model.__name__: model}
        schema: dict[str, Any] = {"$ref": SCHEMA_REF.format(model=self.model.__name__)}
        if self.batch is not None:
            batch = Annotated[list[self.model], Field(max_length=self.batch)]  # type: ignore[name-defined]
            one_or_many: Any = self.model | batch
            schema = TypeAdapter(one_or_many).json_schema(ref_template=SCHEMA_REF)
        content = {"application/json": {"schema": {**schema, "$defs": defs}}}
        return {BODY_EXTENSION: {"required": True, "content": content}}
