// An MCP client written with the npm package @modelcontextprotocol/sdk,
// run by TestMCPNodeClient: node client.mjs CORRAL ARGS... starts
// `CORRAL ARGS...` (corral serve --mcp --session ID) over stdio, lists the
// tools, calls each one and checks the refusals. It prints
// "node client: ok" and exits 0, or prints what failed and exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "corral-node-client", version: "1.0.0" });
await client.connect(transport);

const failures = [];
const check = (cond, what) => { if (!cond) failures.push(what); };
const text = (res) => (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  console.log(`${name} ${JSON.stringify(args)} -> ${res.isError ? "error: " : ""}${text(res).split("\n")[0].slice(0, 160)}`);
  return res;
};
const ok = async (name, args) => {
  const res = await call(name, args);
  check(!res.isError, `${name} ${JSON.stringify(args)} failed: ${text(res)}`);
  return res;
};
const refused = async (name, args, rule) => {
  const res = await call(name, args);
  const t = text(res);
  check(res.isError && t.startsWith("refused (") && t.includes(rule), `${name} ${JSON.stringify(args)} not refused with "${rule}": ${t}`);
};

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
check(JSON.stringify(names) === JSON.stringify(["diff", "edit", "exec", "glob", "list", "read", "search", "write"]), `tools: ${names}`);
for (const t of tools) {
  check(t.inputSchema.additionalProperties === false, `${t.name}: additional properties allowed`);
  for (const p of Object.keys(t.inputSchema.properties || {})) {
    check(!["repo", "repository", "profile", "scope", "agent", "agent_id", "session", "page"].includes(p), `${t.name} takes ${p}`);
  }
}

await ok("list", { path: "docs" });
const read = await ok("read", { path: "README.md" });
check(text(read).includes("hello"), "read content");
await ok("search", { pattern: "TODO", path: "docs" });
await ok("glob", { pattern: "docs/*.md" });
const w = await ok("write", { path: "openwiki/node.md", content: "# Node\n\nfrom the npm client\n" });
const sha = w.structuredContent.sha256;
await ok("edit", { path: "openwiki/node.md", old_text: "npm client", new_text: "npm MCP client", expected_sha256: sha });
const stale = await call("edit", { path: "openwiki/node.md", old_text: "Node", new_text: "x", expected_sha256: sha });
check(stale.isError && text(stale).includes("stale revision"), "stale edit not a conflict");
const ex = await ok("exec", { argv: ["cat", "openwiki/node.md"] });
check(ex.structuredContent.stdout === "# Node\n\nfrom the npm MCP client\n", `exec stdout: ${ex.structuredContent.stdout}`);
const d = await ok("diff", {});
check(text(d).startsWith("create openwiki/node.md"), `diff: ${text(d)}`);

await refused("read", { path: "secrets/key.txt" }, ".openwikiignore:1 hides secrets/");
await refused("read", { path: "/etc/passwd" }, "absolute paths are not allowed");
await refused("glob", { pattern: "**/*" }, "root-wide");
await refused("write", { path: "README.md", content: "x" }, "outside the write scope openwiki/");
await refused("exec", { argv: ["sh", "-c", "id"] }, "never allowed");
const extra = await call("read", { path: "README.md", repo: "/" });
check(extra.isError, "an extra argument was accepted");

await client.close();
if (failures.length > 0) {
  console.log("node client: FAILED\n" + failures.join("\n"));
  process.exit(1);
}
console.log("node client: ok");
