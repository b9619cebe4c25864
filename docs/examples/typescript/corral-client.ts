// A corral daemon client in TypeScript with nothing but Node's standard
// library: node:http over the daemon's unix socket (socketPath). The API is
// described in docs/api/openapi.yaml and served at GET /v1/openapi.json.
//
// corral-client.mjs beside this file is the same program as plain
// JavaScript with JSDoc types, so that Node 18+ runs it without a compiler:
//
//   node corral-client.mjs [/run/corral/corral.sock] DIR
//
// It creates a session over DIR, runs a command with its output streamed,
// reads and writes a file, prints the change set, reviews it (a dry run:
// nothing is written to DIR) and removes the session.
import http from "node:http";

export interface CorralErrorBody {
  kind: string; // invalid, refused, rejected, not_found, conflict, busy, ...
  message: string; // the line corral's CLI prints
  rule?: string;
  refusal?: { kind: string; index: number; token: string; rule: string };
}

export class CorralError extends Error {
  constructor(public status: number, public body: CorralErrorBody) {
    super(body.message);
  }
  get kind(): string {
    return this.body.kind;
  }
}

export interface Session {
  id: string;
  repo: string;
  scope: string;
  read_only: boolean;
  owner: number;
}

export interface ExecResult {
  argv: string[];
  exit_code: number;
  duration_ns: number;
  limits_hit: string[];
  changes: { path: string; kind: string }[];
  new_violations: { path: string; reason: string }[];
}

export interface ReportItem {
  path: string;
  kind: string;
  risk: { level: string; reasons: string[] };
  token: string;
  status?: string;
}

export class Client {
  constructor(public socketPath = "/run/corral/corral.sock") {}

  private request(method: string, path: string, body?: unknown, accept = "application/json"): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const headers: Record<string, string | number> = { Accept: accept };
      if (data !== undefined) {
        headers["Content-Type"] = "application/json";
        headers["Content-Length"] = Buffer.byteLength(data);
      }
      const req = http.request({ socketPath: this.socketPath, method, path, headers }, async (res) => {
        if ((res.statusCode ?? 500) >= 300) {
          const text = await readAll(res);
          let err: CorralErrorBody = { kind: "failed", message: text };
          try {
            err = JSON.parse(text).error;
          } catch {}
          reject(new CorralError(res.statusCode ?? 0, err));
          return;
        }
        resolve(res);
      });
      req.on("error", reject);
      if (data !== undefined) req.write(data);
      req.end();
    });
  }

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body);
    const text = await readAll(res);
    return (res.headers["content-type"] ?? "").startsWith("application/json") ? JSON.parse(text) : (text as T);
  }

  version(): Promise<{ version: string; api: string }> {
    return this.call("GET", "/v1/version");
  }

  createSession(repo: string, capability: Record<string, unknown> = {}): Promise<Session> {
    return this.call("POST", "/v1/sessions", { repo, ...capability });
  }

  removeSession(id: string): Promise<{ removed: string; patch?: string }> {
    return this.call("DELETE", `/v1/sessions/${id}`);
  }

  // execStreamed runs argv; onStdout/onStderr get the output as it arrives.
  async execStreamed(id: string, argv: string[], onStdout: (b: Buffer) => void, onStderr: (b: Buffer) => void): Promise<ExecResult> {
    const res = await this.request("POST", `/v1/sessions/${id}/exec`, { argv, stream: true }, "application/x-ndjson");
    if (!(res.headers["content-type"] ?? "").startsWith("application/x-ndjson")) {
      const result = JSON.parse(await readAll(res)); // answered before any output
      onStdout(Buffer.from(result.stdout ?? "", "base64"));
      onStderr(Buffer.from(result.stderr ?? "", "base64"));
      return result;
    }
    let pending = "";
    for await (const chunk of res) {
      pending += chunk.toString();
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const event = JSON.parse(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
        if (event.stdout !== undefined) onStdout(Buffer.from(event.stdout, "base64"));
        else if (event.stderr !== undefined) onStderr(Buffer.from(event.stderr, "base64"));
        else if (event.result !== undefined) return event.result;
        else if (event.error !== undefined) throw new CorralError(200, event.error);
      }
    }
    throw new CorralError(0, { kind: "failed", message: "the stream ended without a result" });
  }

  read(id: string, path: string): Promise<{ path: string; size: number; sha256: string; content: string }> {
    return this.call("POST", `/v1/sessions/${id}/files:read`, { path });
  }

  write(id: string, path: string, content: string): Promise<{ path: string; created: boolean; sha256: string }> {
    return this.call("POST", `/v1/sessions/${id}/files:write`, { path, content });
  }

  diff(id: string, format = "json"): Promise<any> {
    return this.call("GET", `/v1/sessions/${id}/diff?format=${format}`);
  }

  apply(id: string, approve: string[] = [], dryRun = false): Promise<{ items: ReportItem[]; dry_run: boolean; written: string[] }> {
    return this.call("POST", `/v1/sessions/${id}/apply`, { approve, dry_run: dryRun });
  }
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve(Buffer.concat(chunks).toString()));
    res.on("error", reject);
  });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const repo = args.pop();
  if (!repo) throw new Error("usage: corral-client [SOCKET] DIR");
  const c = new Client(args[0]);

  console.log("daemon:", (await c.version()).version);
  const s = await c.createSession(repo);
  console.log("session:", s.id, "writable:", s.scope || "nothing");
  try {
    const result = await c.execStreamed(s.id, ["ls", "-la"], (b) => process.stdout.write(b), (b) => process.stderr.write(b));
    console.log("exit code:", result.exit_code);
    try {
      await c.execStreamed(s.id, ["sh", "-c", "id"], () => {}, () => {});
    } catch (e) {
      if (!(e instanceof CorralError)) throw e;
      console.log("refused as expected:", e.kind, "-", e.message);
    }
    const readme = await c.read(s.id, "README.md");
    console.log("README.md:", readme.size, "bytes, sha256", readme.sha256.slice(0, 12));
    const w = await c.write(s.id, "openwiki/node.md", "# Written from Node\n");
    console.log("wrote", w.path, w.created ? "created" : "replaced");
    const cs = await c.diff(s.id);
    console.log("change set:", cs.changes.map((ch: { path: string }) => ch.path));
    process.stdout.write(await c.diff(s.id, "patch"));
    let report = await c.apply(s.id);
    for (const item of report.items) console.log("review:", item.risk.level, item.kind, item.path, "approve with", item.token);
    report = await c.apply(s.id, report.items.map((i) => i.token), true);
    console.log("dry run:", report.items.map((i) => [i.path, i.status]), "written:", report.written);
  } finally {
    const removed = await c.removeSession(s.id);
    console.log("removed", removed.removed, "patch kept at", removed.patch ?? "-");
  }
  console.log("node client: ok");
}

main().catch((e) => {
  console.error("corral-client:", e.message);
  process.exit(1);
});
