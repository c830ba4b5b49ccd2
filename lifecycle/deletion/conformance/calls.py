"""The contract's three calls as the checks make them: messages in and out, encoded and read as the contract says
(wire.py), through whichever transport reaches the service."""

from __future__ import annotations

from lifecycle.deletion.conformance.transport import Transport
from lifecycle.deletion.conformance.wire import decode, encode
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    DeleteResponse,
    ExportRequest,
    ExportResponse,
    Subject,
    VerifyRequest,
    VerifyResponse,
)


class ContractCalls:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    async def delete(self, request: DeleteRequest, *, with_unknown_field: bool = False) -> DeleteResponse:
        answer = await self._transport.delete_subject_data(encode(request, with_unknown_field=with_unknown_field))
        return decode(answer, DeleteResponse)

    async def verify(self, deletion_id: str, subject: Subject, *, with_unknown_field: bool = False) -> VerifyResponse:
        request = VerifyRequest(deletion_id=deletion_id, subject=subject)
        answer = await self._transport.verify_subject_erased(encode(request, with_unknown_field=with_unknown_field))
        return decode(answer, VerifyResponse)

    async def export(self, request: ExportRequest, *, with_unknown_field: bool = False) -> ExportResponse:
        answer = await self._transport.export_subject_data(encode(request, with_unknown_field=with_unknown_field))
        return decode(answer, ExportResponse)
