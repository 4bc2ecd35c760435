"""``json.dumps`` and ``json.loads`` for the per-event client, without importing :mod:`json`.

``import json`` imports ``re`` (and with it ``enum``, ``functools``,
``collections``): about 7 ms of start-up measured on this project's machine,
paid by every event an agent spawns, where the whole budget over the
interpreter's own start-up is 8 ms. The C accelerator ``_json`` that
:mod:`json` itself calls has everything the client needs, so this module
drives it directly:

- :func:`dumps` is ``json.dumps(value)`` with the default options, byte for
  byte (the same C encoder, the same separators, ``ensure_ascii``);
- :func:`loads` is ``json.loads(text)`` for UTF-8 text: the same C scanner,
  JSON whitespace around the value, "Extra data" refused. Errors are
  :class:`ValueError`, as ``json.JSONDecodeError`` is.

Where ``_json`` does not exist (another Python implementation), both are
:mod:`json`'s own. Standard library only, no import beyond ``_json``.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _unserialisable(value: "Any") -> "Any":
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class _Context:
    """What the C scanner reads from a ``json.JSONDecoder``: its default options."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def dumps(value: "Any") -> str:
    """``json.dumps(value)``: the same text, from the same C encoder."""
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(value)
    encode = _json.make_encoder({}, _unserialisable, _json.encode_basestring_ascii, None, ": ", ", ",
                                False, False, True)
    return "".join(encode(value, 0))


def loads(data: "str | bytes") -> "Any":
    """``json.loads(data)`` for UTF-8 text (what the daemon sends).

    Raises:
        ValueError: not one JSON value (``json.JSONDecodeError`` is a ValueError too).
    """
    if _json is None:  # pragma: no cover
        import json

        return json.loads(data)
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    if text.startswith("\ufeff"):
        raise ValueError("Unexpected UTF-8 BOM")
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _json.make_scanner(_Context())(text, start)  # type: ignore[arg-type]  # duck-typed decoder
    except StopIteration as exc:
        raise ValueError(f"Expecting value at {exc.value}") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError(f"Extra data at {end}")
    return value
