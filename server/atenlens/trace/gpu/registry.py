"""Registries of hazard handlers, keyed by what they handle (like torch's `register_flop_formula`).

A handler is a small function `handler(call) -> result`: it gets an `InterceptedCall` (the op or
API function, its arguments and the trace's `HazardTracker`), reports what it finds, and returns the
result the program sees — the real (fake) result from `call.run()`, or a placeholder where a fake
tensor cannot know a value. Handlers are keyed by an aten overload (dispatch level) or a Python
function (function level); a handler may also be registered for a predicate over overloads when one
op name is not enough. Registering a key twice is a mistake and raises, so two handlers can never
silently race for one op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Hashable, Optional, TypeVar

if TYPE_CHECKING:
    from atenlens.trace.gpu.tracker import HazardTracker


@dataclass
class InterceptedCall:
    target: Any  # the aten OpOverload or the API function
    args: tuple
    kwargs: dict
    tracker: "HazardTracker"
    run: Callable[[], Any] = field(repr=False, default=lambda: None)  # runs the real (fake) call

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """An argument that may be passed by position or by keyword."""
        if name in self.kwargs:
            return self.kwargs[name]
        return self.args[index] if len(self.args) > index else default


Handler = Callable[[InterceptedCall], Any]
K = TypeVar("K", bound=Hashable)


class DuplicateHandlerError(ValueError):
    pass


class HandlerRegistry(Generic[K]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._by_key: dict[K, Handler] = {}
        self._by_predicate: list[tuple[str, Callable[[K], bool], Handler]] = []
        self._resolved: dict[K, Optional[Handler]] = {}  # lookup runs for every op: cache it

    def register(self, *keys: K) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            for key in keys:
                if key in self._by_key:
                    raise DuplicateHandlerError(f"{self.name}: {key} already has handler {self._by_key[key].__name__}")
                self._by_key[key] = handler
            self._resolved.clear()
            return handler

        return decorate

    def register_predicate(self, name: str, predicate: Callable[[K], bool]) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            if any(existing == name for existing, _, _ in self._by_predicate):
                raise DuplicateHandlerError(f"{self.name}: predicate {name!r} is already registered")
            self._by_predicate.append((name, predicate, handler))
            self._resolved.clear()
            return handler

        return decorate

    def lookup(self, key: K) -> Optional[Handler]:
        try:
            return self._resolved[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable key: nothing can be registered for it
            return None
        handler = self._by_key.get(key)
        if handler is None:
            handler = next((h for _, predicate, h in self._by_predicate if predicate(key)), None)
        self._resolved[key] = handler
        return handler

    def keys(self) -> tuple[K, ...]:
        return tuple(self._by_key)


DISPATCH_HANDLERS: HandlerRegistry[Any] = HandlerRegistry("aten op hazards")
FUNCTION_HANDLERS: HandlerRegistry[Any] = HandlerRegistry("API call hazards")
