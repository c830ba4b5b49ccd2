// Where an export's part goes: an S3-compatible object store (SeaweedFS locally, S3 itself in production),
// configured by the same variables as the rest of the project: S3_ENDPOINT_URL, S3_BUCKET, S3_REGION,
// S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY. Requests are signed with SigV4 by npm's aws4fetch and sent with
// Node's own fetch; keys are addressed path-style (`<endpoint>/<bucket>/<key>`), as SeaweedFS and S3 both accept.
import { AwsClient } from "aws4fetch";

export interface ObjectStoreConfig {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export function objectStoreFromEnvironment(env: NodeJS.ProcessEnv): ObjectStoreConfig | undefined {
  const { S3_ENDPOINT_URL, S3_BUCKET, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_REGION } = env;
  if (!S3_ENDPOINT_URL || !S3_BUCKET || !S3_ACCESS_KEY_ID || !S3_SECRET_ACCESS_KEY) return undefined;
  return {
    endpoint: S3_ENDPOINT_URL.replace(/\/+$/, ""),
    bucket: S3_BUCKET,
    region: S3_REGION || "us-east-1",
    accessKeyId: S3_ACCESS_KEY_ID,
    secretAccessKey: S3_SECRET_ACCESS_KEY,
  };
}

export class ObjectStore {
  private readonly client: AwsClient;

  constructor(readonly config: ObjectStoreConfig) {
    this.client = new AwsClient({
      accessKeyId: config.accessKeyId,
      secretAccessKey: config.secretAccessKey,
      region: config.region,
      service: "s3",
      // Temporal retries the activity; a quick retry here only hides a blip.
      retries: 2,
    });
  }

  /** Writes `body` at `key` in `bucket` (the configured one when empty), replacing any object there. */
  async put(bucket: string, key: string, body: Uint8Array<ArrayBuffer>, contentType: string): Promise<void> {
    const path = [bucket || this.config.bucket, ...key.split("/")].map(encodeURIComponent).join("/");
    const answer = await this.client.fetch(`${this.config.endpoint}/${path}`, {
      method: "PUT",
      body,
      headers: { "content-type": contentType },
    });
    if (!answer.ok) {
      throw new Error(`PUT ${key} answered ${answer.status}: ${(await answer.text()).slice(0, 500)}`);
    }
  }
}
