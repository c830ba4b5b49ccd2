"""The contract's encoding, as the kit writes requests and reads answers: `json/protobuf` payloads (protobuf's
canonical JSON mapping) with `messageType` the message's full name (proto/README.md, "Encoding").

Answers are read ignoring fields the kit does not know, as the contract asks of every reader; a request may carry
a field no version of the contract has, which a conforming service ignores."""

from __future__ import annotations

import json
from typing import TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload

JSON_PROTOBUF = b"json/protobuf"
# A field no version of the contract has or will have: the kit's probe of a reader's leniency.
UNKNOWN_FIELD = "conformanceKitProbe"

M = TypeVar("M", bound=Message)


class AnswerUnreadable(Exception):
    """An answer not encoded as the contract says, or not the message the call returns."""


def encode(request: Message, *, with_unknown_field: bool = False) -> Payload:
    body = json_format.MessageToDict(request)
    if with_unknown_field:
        body[UNKNOWN_FIELD] = "a field this contract does not have"
    return Payload(
        metadata={"encoding": JSON_PROTOBUF, "messageType": request.DESCRIPTOR.full_name.encode()},
        data=json.dumps(body).encode(),
    )


def decode(answer: Payload, message_type: type[M]) -> M:
    expected = message_type.DESCRIPTOR.full_name
    encoding = answer.metadata.get("encoding", b"")
    named = answer.metadata.get("messageType", b"")
    if encoding != JSON_PROTOBUF or named != expected.encode():
        raise AnswerUnreadable(
            f"the answer is {encoding.decode(errors='replace') or 'unencoded'}"
            f" {named.decode(errors='replace') or '(no messageType)'},"
            f" where the contract asks json/protobuf {expected}"
        )
    try:
        return json_format.Parse(answer.data, message_type(), ignore_unknown_fields=True)
    except json_format.ParseError as err:
        raise AnswerUnreadable(f"the answer does not read as {expected}: {err}") from None
