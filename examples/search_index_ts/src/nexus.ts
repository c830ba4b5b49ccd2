// The deletion contract as a Nexus service (proto/README.md): `lifecycle.deletion.v1.DeletionService`, its
// operations named after the rpcs, taking and returning the same messages as the activities. The gateway calls it
// through an endpoint an operator created to this worker's task queue in its own namespace.
//
// - VerifySubjectErased is synchronous: the count, answered within Nexus's 10 s deadline.
// - DeleteSubjectData and ExportSubjectData are asynchronous: each starts a workflow (workflows.ts) that runs the
//   activity of the rpc's name, so a slice may outlast the deadline (paced, retried), an export may take hours,
//   and cancelling the gateway's deletion cancels that workflow.
import { WorkflowRunOperationHandler, startWorkflow } from "@temporalio/nexus";
import * as nexus from "nexus-rpc";

import type { activities } from "./activities.js";
import {
  DeletionService,
  type DeleteRequest,
  type DeleteResponse,
  type ExportRequest,
  type ExportResponse,
  type VerifyRequest,
  type VerifyResponse,
} from "./gen/lifecycle/deletion/v1/service_pb.js";
// Types alone: the workflows run in the sandbox of the worker's bundle, and are started here by name.
import type { DeleteSubjectDataOperation, ExportSubjectDataOperation } from "./workflows.js";

// Named as the protobuf service is, as every language's handler names it; its operations as the rpcs.
export const deletionService = nexus.service(DeletionService.typeName, {
  DeleteSubjectData: nexus.operation<DeleteRequest, DeleteResponse>(),
  VerifySubjectErased: nexus.operation<VerifyRequest, VerifyResponse>(),
  ExportSubjectData: nexus.operation<ExportRequest, ExportResponse>(),
});

export function deletionHandler(calls: ReturnType<typeof activities>) {
  return nexus.serviceHandler(deletionService, {
    // The Nexus request id makes a repeated start of the same operation find the workflow it started.
    DeleteSubjectData: new WorkflowRunOperationHandler<DeleteRequest, DeleteResponse>((ctx, request) =>
      startWorkflow<typeof DeleteSubjectDataOperation>(ctx, "DeleteSubjectDataOperation", {
        workflowId: `delete-slice-${request.deletionId}-${ctx.requestId}`,
        args: [request],
        // Ended by the server even with no worker left, as SLICE_BOUND in lifecycle/deletion/nexus_handler.py (which
        // says why): a worker killed mid-slice shows the service waiting, and nothing of its slice runs later.
        workflowExecutionTimeout: "30s",
      }),
    ),
    // The count needs nothing of an activity's context: called as it is.
    VerifySubjectErased: (_ctx, request) => calls.VerifySubjectErased(request),
    ExportSubjectData: new WorkflowRunOperationHandler<ExportRequest, ExportResponse>((ctx, request) =>
      startWorkflow<typeof ExportSubjectDataOperation>(ctx, "ExportSubjectDataOperation", {
        workflowId: `export-part-${request.exportId}-${ctx.requestId}`,
        args: [request],
      }),
    ),
  });
}
