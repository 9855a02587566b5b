"""An engine's errors in the ports' words (ports.errors): each adapter names which of its engine's
exceptions mean "did not answer" and which "refused this value", and its public methods raise
StoreUnavailable and ValueRefused for those. The HTTP layer and the consumers' failure rule then
decide by meaning, never by an engine's class names or messages. Anything else (a bug, a broken
statement) is raised as it was."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from enum import Enum
from types import TracebackType
from typing import Any, TypeVar

from ports.errors import StoreUnavailable, ValueRefused


class Meaning(Enum):
    UNAVAILABLE = "unavailable"
    VALUE = "value"


Classify = Callable[[BaseException], Meaning | None]
C = TypeVar("C", bound=type)


def port_errors(port: str, classify: Classify) -> Callable[[C], C]:
    """A class decorator for an adapter of `port`: its constructor and every public method (and a
    context manager one returns, on entry and exit) raise the ports' errors for the engine's that
    `classify` knows."""

    def decorate(cls: C) -> C:
        # inherited ones too (adapters.sql.reads), wrapped on this class: the base stays the engine's
        for name, attribute in inspect.getmembers(cls, inspect.isfunction):
            # the constructor too: a client that connects when made (Couchbase's) is made on first use
            if name == "__init__" or not name.startswith("_"):
                setattr(cls, name, _translating(attribute, port, classify))
        return cls

    return decorate


def _port_error(error: Exception, port: str, classify: Classify) -> Exception | None:
    meaning = classify(error)
    if meaning is Meaning.UNAVAILABLE:
        return StoreUnavailable(port)
    if meaning is Meaning.VALUE:
        return ValueRefused(f"{type(error).__name__}: {error}")
    return None


@contextmanager
def engine_errors(port: str, classify: Classify) -> Iterator[None]:
    """Raises the ports' error for an engine's error that `classify` knows; any other as it was."""
    try:
        yield
    except Exception as error:
        replacement = _port_error(error, port, classify)
        if replacement is None:
            raise
        raise replacement from error


def _translating(method: Callable[..., Any], port: str, classify: Classify) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # engine_errors inlined: this runs on every call of every adapter, capture's publish included
        try:
            result = method(*args, **kwargs)
        except Exception as error:
            replacement = _port_error(error, port, classify)
            if replacement is None:
                raise
            raise replacement from error
        if isinstance(result, AbstractContextManager):
            return _TranslatingContext(result, port, classify)
        return result

    return wrapper


class _TranslatingContext(AbstractContextManager[Any]):
    """A transaction or snapshot an adapter hands out: its BEGIN and COMMIT are the engine's too."""

    def __init__(self, inner: AbstractContextManager[Any], port: str, classify: Classify) -> None:
        self._inner, self._port, self._classify = inner, port, classify

    def __enter__(self) -> Any:
        with engine_errors(self._port, self._classify):
            return self._inner.__enter__()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> bool | None:
        with engine_errors(self._port, self._classify):
            return self._inner.__exit__(kind, value, traceback)
