// The workflows behind the Nexus service's asynchronous operations (nexus.ts), run by this service's own worker in
// its own namespace: each runs the service's activity of the rpc's name on the worker's task queue. The worker
// bundles this module (and what it imports) into Temporal's deterministic sandbox, so it imports the activities'
// types alone.
import { proxyActivities, type ActivityOptions } from "@temporalio/workflow";

import type { activities } from "./activities.js";
import type { DeleteRequest, DeleteResponse, ExportRequest, ExportResponse } from "./gen/lifecycle/deletion/v1/service_pb.js";

type Activities = ReturnType<typeof activities>;

// As the gateway retries a call on a task queue: doubling from 1 s to a minute, 5 attempts, then the operation
// fails with the activity's last error, which the gateway reads as it reads an activity's.
const retry: ActivityOptions["retry"] = {
  initialInterval: "1s",
  backoffCoefficient: 2,
  maximumInterval: "1m",
  maximumAttempts: 5,
};

// Taken within 10 s by a worker, or none is there to take it (as lifecycle/deletion/nexus_handler.py's).
const { DeleteSubjectData } = proxyActivities<Activities>({
  scheduleToStartTimeout: "10s",
  startToCloseTimeout: "1m",
  retry,
});
// An account's part may take hours; the contract asks an export to heartbeat at least every minute.
const { ExportSubjectData } = proxyActivities<Activities>({
  startToCloseTimeout: "12h",
  heartbeatTimeout: "1m",
  retry,
});

/** One slice of a deletion, asked for through Nexus. */
export async function DeleteSubjectDataOperation(request: DeleteRequest): Promise<DeleteResponse> {
  return await DeleteSubjectData(request);
}

/** An account's part of an export, asked for through Nexus. */
export async function ExportSubjectDataOperation(request: ExportRequest): Promise<ExportResponse> {
  return await ExportSubjectData(request);
}
