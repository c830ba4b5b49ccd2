// The index's own store, plain files in one folder: each bot's entries in one JSON document, `index/<bot>.json`
// (its account's id and its entries, in id order), and its snapshot files in `snapshots/<bot>/`. A document is
// replaced whole by writing a new one beside it and renaming it over the old, so a crash leaves one or the other.
//
// Nothing here knows about Temporal or the gateway; the activities (activities.ts) turn the contract's calls
// into these.
import { mkdir, readFile, readdir, rename, rm, rmdir, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface Entry {
  id: number;
  term: string;
}

interface BotDocument {
  account: string;
  entries: Entry[];
}

export interface Deleted {
  rows: number;
  files: number;
  // The highest entry id deleted, or the cursor given when none was.
  cursor: number;
}

export interface Held {
  rows: number;
  files: number;
}

export interface BotData {
  bot: string;
  entries: Entry[];
  // Each snapshot file's name and content.
  snapshots: { name: string; content: string }[];
}

function missing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === "ENOENT";
}

export class SearchIndexStore {
  constructor(readonly root: string) {}

  private document(bot: string): string {
    return join(this.root, "index", `${bot}.json`);
  }

  private snapshots(bot: string): string {
    return join(this.root, "snapshots", bot);
  }

  private async read(bot: string): Promise<BotDocument | undefined> {
    try {
      return JSON.parse(await readFile(this.document(bot), "utf8")) as BotDocument;
    } catch (error) {
      if (missing(error)) return undefined;
      throw error;
    }
  }

  private async write(bot: string, document: BotDocument): Promise<void> {
    const path = this.document(bot);
    await mkdir(join(this.root, "index"), { recursive: true });
    await writeFile(`${path}.new`, JSON.stringify(document));
    await rename(`${path}.new`, path);
  }

  private async snapshotNames(bot: string): Promise<string[]> {
    try {
      return (await readdir(this.snapshots(bot))).sort();
    } catch (error) {
      if (missing(error)) return [];
      throw error;
    }
  }

  /** Adds `entries` entries and `files` snapshot files to the bot's data. */
  async add(bot: string, account: string, entries: number, files: number): Promise<void> {
    const document = (await this.read(bot)) ?? { account, entries: [] };
    const last = document.entries.at(-1)?.id ?? 0;
    for (let n = 1; n <= entries; n++) document.entries.push({ id: last + n, term: `t${last + n}` });
    await this.write(bot, document);
    await mkdir(this.snapshots(bot), { recursive: true });
    for (let n = 0; n < files; n++) {
      await writeFile(join(this.snapshots(bot), `${n}.json`), JSON.stringify({ snapshot: n }));
    }
  }

  /**
   * Up to `limit` of the bot's entries above the id `after`, in id order; once no entry is left, its snapshot
   * files too (one already gone is not an error, and is not counted).
   */
  async delete(bot: string, after: number, limit: number): Promise<Deleted> {
    const document = await this.read(bot);
    const slice = (document?.entries ?? []).filter((entry) => entry.id > after).slice(0, limit);
    if (document !== undefined && slice.length > 0) {
      const gone = new Set(slice.map((entry) => entry.id));
      document.entries = document.entries.filter((entry) => !gone.has(entry.id));
      await this.write(bot, document);
    }
    let files = 0;
    if (slice.length < limit) {
      for (const name of await this.snapshotNames(bot)) {
        try {
          await unlink(join(this.snapshots(bot), name));
          files++;
        } catch (error) {
          if (!missing(error)) throw error; // a retried call: already gone
        }
      }
      await rmdir(this.snapshots(bot)).catch((error: unknown) => {
        if (!missing(error)) throw error;
      });
      if (document !== undefined && document.entries.length === 0) {
        // Nothing of the bot is left but the document's account id: it goes too.
        await rm(this.document(bot), { force: true });
      }
    }
    return { rows: slice.length, files, cursor: slice.at(-1)?.id ?? after };
  }

  /** The bot's entries and snapshot files, counted exactly. */
  async count(bot: string): Promise<Held> {
    const document = await this.read(bot);
    return { rows: document?.entries.length ?? 0, files: (await this.snapshotNames(bot)).length };
  }

  /** Everything the store holds of the account's bots, bot by bot in id order. */
  async ofAccount(account: string): Promise<BotData[]> {
    let names: string[];
    try {
      names = (await readdir(join(this.root, "index"))).filter((name) => name.endsWith(".json")).sort();
    } catch (error) {
      if (missing(error)) return [];
      throw error;
    }
    const found: BotData[] = [];
    for (const name of names) {
      const bot = name.slice(0, -".json".length);
      const document = await this.read(bot);
      if (document?.account !== account) continue;
      const snapshots = [];
      for (const file of await this.snapshotNames(bot)) {
        snapshots.push({ name: file, content: await readFile(join(this.snapshots(bot), file), "utf8") });
      }
      found.push({ bot, entries: document.entries, snapshots });
    }
    return found;
  }
}
