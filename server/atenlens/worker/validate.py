"""A report that crossed a process boundary, checked before anyone uses it.

The child that writes a trace's report runs the user's code, and that code can reach the report
pipe and the nonce that frames it (both are in the child's own frames), so what arrives is data of
unknown shape. A report whose fields do not have the types `report.py` declares would fail later,
far from here, wherever the server first uses the field (and again each time it publishes the
document's diagnostics). Here it fails once, with the path of the first bad field, and becomes that
trace's error.

Torch-free and pygls-free: the worker checks the child's report, the client checks the worker's.
The check is driven by the dataclasses' type hints, so a field added to `report.py` is checked too.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Literal, Union, get_args, get_origin, get_type_hints

from atenlens.report import TraceReport, from_jsonable

Check = Callable[[Any, str], None]
_CHECKS: dict[Any, Check] = {}


class MalformedReport(ValueError):
    """The data is not a TraceReport; the message names the first bad field."""


def checked_report(data: Any) -> TraceReport:
    """`data` (parsed JSON) as a TraceReport; raises MalformedReport when any field has the wrong type."""
    _check(TraceReport)(data, "report")
    return from_jsonable(TraceReport, data)


def _check(hint: Any) -> Check:
    check = _CHECKS.get(hint)
    if check is None:
        _CHECKS[hint] = _forward(hint)  # a dataclass that contains itself
        check = _CHECKS[hint] = _build(hint)
    return check


def _forward(hint: Any) -> Check:
    return lambda value, where: _CHECKS[hint](value, where)


def _fail(where: str, wanted: str, value: Any) -> None:
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    raise MalformedReport(f"{where}: expected {wanted}, got {type(value).__name__} {shown}")


def _scalar(accepts: Callable[[Any], bool], wanted: str) -> Check:
    def check_scalar(value: Any, where: str) -> None:
        if not accepts(value):
            _fail(where, wanted, value)

    return check_scalar


def _build(hint: Any) -> Check:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return lambda value, where: None
    if hint is type(None):
        return _scalar(lambda v: v is None, "null")
    if hint is str:
        return _scalar(lambda v: isinstance(v, str), "a string")
    if hint is bool:
        return _scalar(lambda v: isinstance(v, bool), "true or false")
    if hint is int:
        return _scalar(lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
    if hint is float:
        return _scalar(
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a finite number"
        )
    if origin is Literal:
        allowed = set(args)
        return _scalar(lambda v: isinstance(v, (str, int)) and v in allowed, " or ".join(map(repr, args)))
    if origin is Union:
        nullable = type(None) in args
        options = [_check(a) for a in args if a is not type(None)]
        names = " or ".join(getattr(a, "__name__", str(a)) for a in args)

        def check_union(value: Any, where: str) -> None:
            if value is None and nullable:
                return
            if len(options) == 1:
                options[0](value, where)  # Optional[X]: X's own complaint
                return
            for option in options:
                try:
                    option(value, where)
                    return
                except MalformedReport:
                    pass
            _fail(where, names, value)

        return check_union
    if origin is tuple:
        item = _check(args[0]) if len(args) == 2 and args[1] is Ellipsis else _check(Any)

        def check_tuple(value: Any, where: str) -> None:
            if not isinstance(value, list):
                _fail(where, "an array", value)
            for index, element in enumerate(value):
                item(element, f"{where}[{index}]")

        return check_tuple
    if origin is dict:
        key, val = (_check(args[0]), _check(args[1])) if args else (_check(Any), _check(Any))

        def check_dict(value: Any, where: str) -> None:
            if not isinstance(value, dict):
                _fail(where, "an object", value)
            for name, element in value.items():
                key(name, f"{where} key")
                val(element, f"{where}[{name!r}]")

        return check_dict
    if dataclasses.is_dataclass(hint):
        hints = get_type_hints(hint)
        fields = [
            (
                f.name,
                _check(hints[f.name]),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(hint)
        ]

        def check_object(value: Any, where: str) -> None:
            if not isinstance(value, dict):
                _fail(where, f"a {getattr(hint, '__name__', hint)} object", value)
            for name, check, required in fields:
                if name in value:
                    check(value[name], f"{where}.{name}")
                elif required:
                    raise MalformedReport(f"{where}: the required key {name!r} is missing")

        return check_object
    return lambda value, where: None  # a type report.py does not use: nothing to check
