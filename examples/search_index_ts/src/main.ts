// The TypeScript search index: `node dist/main.js serve ...` runs its Temporal worker; `node dist/main.js seed
// ...` adds data to its store (for a demo or a test). See README.md beside src/.
import { NativeConnection, Worker, type WorkerOptions } from "@temporalio/worker";
import { delimiter } from "node:path";
import { parseArgs } from "node:util";

import { activities } from "./activities.js";
import { deletionHandler } from "./nexus.js";
import { ObjectStore, objectStoreFromEnvironment } from "./object-store.js";
import { SearchIndexStore } from "./store.js";

const USAGE = `usage:
  main.js serve --address HOST:PORT --task-queue QUEUE --store DIR [--namespace NS] [--name NAME] [--nexus-endpoint ENDPOINT]
  main.js seed --store DIR --bot BOT_ID --account ACCOUNT_ID [--entries N] [--files N]`;

async function serve(options: Record<string, string | undefined>): Promise<void> {
  const { address, store, name } = options;
  const taskQueue = options["task-queue"];
  const endpoint = options["nexus-endpoint"];
  if (!address || !taskQueue || !store) throw new Error(USAGE);
  const config = objectStoreFromEnvironment(process.env);
  const calls = activities(new SearchIndexStore(store), config && new ObjectStore(config), name ?? "search-index-ts");
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection,
    namespace: options.namespace ?? "default",
    // Its own queue alone.
    taskQueue,
    activities: calls,
    // Behind an endpoint, the contract's Nexus service too, with the workflows its asynchronous operations start;
    // on a queue, the activities alone, so nothing is bundled.
    ...(endpoint && {
      nexusServices: [deletionHandler(calls)],
      workflowsPath: require.resolve("./workflows"),
      // The bundler finds the workflows' packages where Node finds them, NODE_PATH included (a build outside the
      // project, as the tests make).
      bundlerOptions: { webpackConfigHook: withNodePath },
    }),
    // The contract's messages as `json/protobuf`, unknown fields ignored (payload-converter.ts).
    dataConverter: { payloadConverterPath: require.resolve("./payload-converter") },
  });
  const through = endpoint ? ` in ${options.namespace ?? "default"}, behind Nexus endpoint ${endpoint}` : "";
  console.log(`search index (TypeScript) serving ${taskQueue}${through}`);
  // Runs until SIGINT or SIGTERM, then finishes the activities in hand and stops.
  await worker.run();
  await connection.close();
}

type BundlerOptions = NonNullable<WorkerOptions["bundlerOptions"]>;
type WebpackConfiguration = Parameters<NonNullable<BundlerOptions["webpackConfigHook"]>>[0];

function withNodePath(config: WebpackConfiguration): WebpackConfiguration {
  const paths = (process.env.NODE_PATH ?? "").split(delimiter).filter(Boolean);
  const modules = config.resolve?.modules ?? ["node_modules"];
  return { ...config, resolve: { ...config.resolve, modules: [...modules, ...paths] } };
}

async function seed(options: Record<string, string | undefined>): Promise<void> {
  const { store, bot, account } = options;
  if (!store || !bot || !account) throw new Error(USAGE);
  const entries = Number(options.entries ?? 10);
  const files = Number(options.files ?? 1);
  await new SearchIndexStore(store).add(bot, account, entries, files);
  console.log(JSON.stringify({ bot, account, entries, files }));
}

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: Object.fromEntries(
      ["address", "task-queue", "store", "namespace", "name", "nexus-endpoint", "bot", "account", "entries", "files"].map((option) => [
        option,
        { type: "string" as const },
      ]),
    ),
  });
  const commands: Record<string, (options: typeof values) => Promise<void>> = { serve, seed };
  const command = commands[positionals[0] ?? ""];
  if (command === undefined) throw new Error(USAGE);
  await command(values);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
