// The deletion contract's three calls (proto/lifecycle/deletion/v1/service.proto), each an activity of exactly
// the rpc's name, reading and returning the messages protoc-gen-es generated from that .proto.
import { create } from "@bufbuild/protobuf";
import { Context } from "@temporalio/activity";
import { ApplicationFailure } from "@temporalio/common";
import { createHash } from "node:crypto";

import {
  DeleteResponseSchema,
  ExportResponseSchema,
  Subject_Kind,
  VerifyResponseSchema,
  type DeleteRequest,
  type DeleteResponse,
  type ExportRequest,
  type ExportResponse,
  type Subject,
  type VerifyRequest,
  type VerifyResponse,
} from "./gen/lifecycle/deletion/v1/service_pb.js";
import type { ObjectStore } from "./object-store.js";
import type { SearchIndexStore } from "./store.js";

// Entries per call at most, whatever max_rows allows: each call rewrites the bot's document once.
export const MAX_SLICE = 500;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The subject's id, when it is of `kind`; anything else is an error no retry mends, for an operator to see. */
function idOf(subject: Subject | undefined, kind: Subject_Kind): string {
  if (subject?.kind !== kind || !UUID.test(subject.id)) {
    // The id names a file of the store: only the canonical UUID the contract promises is taken.
    const got = `${Subject_Kind[subject?.kind ?? Subject_Kind.UNSPECIFIED]} ${JSON.stringify(subject?.id ?? "")}`;
    throw ApplicationFailure.nonRetryable(`unsupported subject ${got}`, "UnsupportedSubject");
  }
  return subject.id;
}

export function activities(store: SearchIndexStore, objects: ObjectStore | undefined, name: string) {
  return {
    async DeleteSubjectData(request: DeleteRequest): Promise<DeleteResponse> {
      const bot = idOf(request.subject, Subject_Kind.BOT);
      let limit = Math.min(request.maxRows || MAX_SLICE, MAX_SLICE);
      if (request.rowsPerSecond > 0 && request.maxDurationMs > 0) {
        // No more than the budget allows within the slice's duration: the call returns within about that.
        limit = Math.min(limit, Math.max(1, Math.floor((request.rowsPerSecond * request.maxDurationMs) / 1000)));
      }
      const started = performance.now();
      // The cursor is ours: the highest entry id deleted so far. An older one (an answer lost to a crash)
      // deletes nothing twice: those entries are gone from the document.
      const deleted = await store.delete(bot, Number(request.cursor || 0), limit);
      if (request.rowsPerSecond > 0 && deleted.rows > 0) {
        // The gateway's share of its deletion budget for this service: never faster than that.
        const owed = (deleted.rows / request.rowsPerSecond) * 1000 - (performance.now() - started);
        if (owed > 0) await Context.current().sleep(owed);
      }
      const left = await store.count(bot);
      const seconds = (performance.now() - started) / 1000;
      return create(DeleteResponseSchema, {
        rowsDeleted: BigInt(deleted.rows),
        filesDeleted: BigInt(deleted.files),
        cursor: String(deleted.cursor),
        done: left.rows === 0 && left.files === 0,
        remainingRowsEstimate: BigInt(left.rows),
        remainingFilesEstimate: BigInt(left.files),
        measuredRowsPerSecond: deleted.rows > 0 && seconds > 0 ? deleted.rows / seconds : 0,
      });
    },

    async VerifySubjectErased(request: VerifyRequest): Promise<VerifyResponse> {
      const held = await store.count(idOf(request.subject, Subject_Kind.BOT));
      return create(VerifyResponseSchema, { remainingRows: BigInt(held.rows), remainingFiles: BigInt(held.files) });
    },

    async ExportSubjectData(request: ExportRequest): Promise<ExportResponse> {
      const account = idOf(request.subject, Subject_Kind.ACCOUNT);
      if (objects === undefined) {
        throw ApplicationFailure.nonRetryable("no object store configured (S3_ENDPOINT_URL...)", "NoObjectStore");
      }
      const bots = await store.ofAccount(account);
      if (bots.length === 0) return create(ExportResponseSchema, {});
      // One JSON object a line: each entry, then each snapshot file with its content.
      const lines: string[] = [];
      let rows = 0;
      let files = 0;
      for (const { bot, entries, snapshots } of bots) {
        for (const entry of entries) lines.push(JSON.stringify({ bot_id: bot, entry_id: entry.id, term: entry.term }));
        for (const file of snapshots) lines.push(JSON.stringify({ bot_id: bot, snapshot: file.name, content: file.content }));
        rows += entries.length;
        files += snapshots.length;
      }
      const body = new TextEncoder().encode(lines.map((line) => `${line}\n`).join(""));
      const contentType = "application/x-ndjson";
      // The prefix is the export's; the name is this service's registered one, so parts never overwrite.
      const key = `${request.objectKeyPrefix}${name}.ndjson`;
      await objects.put(request.bucket, key, body, contentType);
      return create(ExportResponseSchema, {
        objectKey: key,
        rows: BigInt(rows),
        files: BigInt(files),
        sha256: createHash("sha256").update(body).digest("hex"),
        sizeBytes: BigInt(body.byteLength),
        contentType,
      });
    },
  };
}
