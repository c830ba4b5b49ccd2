"""Free text that people name things with: printable, valid Unicode, storable in PostgreSQL as given.

The rules are declared in the OpenAPI schema as patterns too, so that a client generated from it, or a gateway
validating against it, refuses exactly what the API refuses.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# A character the API stores: no control character. (Lone surrogates, which JSON escapes can carry, are refused
# too but not declared: Hypothesis, and so Schemathesis, drops a pattern naming them and never sends them.)
_PRINTABLE = r"[^\x00-\x1f\x7f]"
# Printable and not whitespace: Python's str.strip() whitespace, which the models strip before checking lengths,
# so a name needs at least one of these to be non-empty.
_VISIBLE = r"[^\x00-\x20\x7f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
PRINTABLE_PATTERN = rf"^{_PRINTABLE}*$"
NAME_PATTERN = rf"^{_PRINTABLE}*{_VISIBLE}{_PRINTABLE}*$"


def _printable(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


class DeclaredPattern:
    """Adds a pattern to a field's JSON schema only: the validators enforce the rule, with clearer wording."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema: dict[str, Any] = handler(core_schema)
        schema["pattern"] = self.pattern
        return schema


PrintableText = Annotated[str, AfterValidator(_printable), DeclaredPattern(PRINTABLE_PATTERN)]
# A name: printable, and not blank once surrounding whitespace is stripped.
PrintableName = Annotated[str, AfterValidator(_printable), DeclaredPattern(NAME_PATTERN)]
