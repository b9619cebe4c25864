// corral-client.ts as plain JavaScript with JSDoc types: Node 18+ runs it
// without a compiler. Keep the two files the same program.
//
//   node corral-client.mjs [/run/corral/corral.sock] DIR
import http from "node:http";

/**
 * @typedef {{kind: string, message: string, rule?: string,
 *   refusal?: {kind: string, index: number, token: string, rule: string}}} CorralErrorBody
 * @typedef {{id: string, repo: string, scope: string, read_only: boolean, owner: number}} Session
 * @typedef {{argv: string[], exit_code: number, duration_ns: number, limits_hit: string[],
 *   changes: {path: string, kind: string}[], new_violations: {path: string, reason: string}[]}} ExecResult
 * @typedef {{path: string, kind: string, risk: {level: string, reasons: string[]}, token: string, status?: string}} ReportItem
 */

export class CorralError extends Error {
  /** @param {number} status @param {CorralErrorBody} body */
  constructor(status, body) {
    super(body.message);
    this.status = status;
    this.body = body;
  }
  /** @returns {string} */
  get kind() {
    return this.body.kind;
  }
}

export class Client {
  /** @param {string} [socketPath] */
  constructor(socketPath = "/run/corral/corral.sock") {
    this.socketPath = socketPath;
  }

  /**
   * @param {string} method @param {string} path @param {unknown} [body] @param {string} [accept]
   * @returns {Promise<http.IncomingMessage>}
   */
  request(method, path, body, accept = "application/json") {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      /** @type {Record<string, string | number>} */
      const headers = { Accept: accept };
      if (data !== undefined) {
        headers["Content-Type"] = "application/json";
        headers["Content-Length"] = Buffer.byteLength(data);
      }
      const req = http.request({ socketPath: this.socketPath, method, path, headers }, async (res) => {
        if ((res.statusCode ?? 500) >= 300) {
          const text = await readAll(res);
          /** @type {CorralErrorBody} */
          let err = { kind: "failed", message: text };
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

  /** @param {string} method @param {string} path @param {unknown} [body] @returns {Promise<any>} */
  async call(method, path, body) {
    const res = await this.request(method, path, body);
    const text = await readAll(res);
    return (res.headers["content-type"] ?? "").startsWith("application/json") ? JSON.parse(text) : text;
  }

  /** @returns {Promise<{version: string, api: string}>} */
  version() {
    return this.call("GET", "/v1/version");
  }

  /** @param {string} repo @param {Record<string, unknown>} [capability] @returns {Promise<Session>} */
  createSession(repo, capability = {}) {
    return this.call("POST", "/v1/sessions", { repo, ...capability });
  }

  /** @param {string} id @returns {Promise<{removed: string, patch?: string}>} */
  removeSession(id) {
    return this.call("DELETE", `/v1/sessions/${id}`);
  }

  /**
   * execStreamed runs argv; onStdout/onStderr get the output as it arrives.
   * @param {string} id @param {string[]} argv
   * @param {(b: Buffer) => void} onStdout @param {(b: Buffer) => void} onStderr
   * @returns {Promise<ExecResult>}
   */
  async execStreamed(id, argv, onStdout, onStderr) {
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
      let nl;
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

  /** @param {string} id @param {string} path @returns {Promise<{path: string, size: number, sha256: string, content: string}>} */
  read(id, path) {
    return this.call("POST", `/v1/sessions/${id}/files:read`, { path });
  }

  /** @param {string} id @param {string} path @param {string} content @returns {Promise<{path: string, created: boolean, sha256: string}>} */
  write(id, path, content) {
    return this.call("POST", `/v1/sessions/${id}/files:write`, { path, content });
  }

  /** @param {string} id @param {string} [format] @returns {Promise<any>} */
  diff(id, format = "json") {
    return this.call("GET", `/v1/sessions/${id}/diff?format=${format}`);
  }

  /**
   * @param {string} id @param {string[]} [approve] @param {boolean} [dryRun]
   * @returns {Promise<{items: ReportItem[], dry_run: boolean, written: string[]}>}
   */
  apply(id, approve = [], dryRun = false) {
    return this.call("POST", `/v1/sessions/${id}/apply`, { approve, dry_run: dryRun });
  }
}

/** @param {http.IncomingMessage} res @returns {Promise<string>} */
function readAll(res) {
  return new Promise((resolve, reject) => {
    /** @type {Buffer[]} */
    const chunks = [];
    res.on("data", (c) => chunks.push(c));
    res.on("end", () => resolve(Buffer.concat(chunks).toString()));
    res.on("error", reject);
  });
}

async function main() {
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
    console.log("change set:", cs.changes.map((/** @type {{path: string}} */ ch) => ch.path));
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
