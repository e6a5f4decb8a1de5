// The TypeScript SDK's client as an agent: connects to the gateway (argv[2]) over
// streamable HTTP, lists, calls `echo`, calls `guarded` (answering its elicitation with
// the answer in argv[3]: accept or decline), waits for one tools/list_changed after
// printing "ready", and prints one JSON line of what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, answer] = process.argv.slice(2);
const asked = [];
const client = new Client({ name: "ts-agent", version: "0" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return answer === "accept" ? { action: "accept", content: { approve: true } } : { action: answer };
});
let changed;
const told = new Promise((resolve) => { changed = resolve; });
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => changed(true));

await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const out = {};
out.listed = (await client.listTools()).tools.map((t) => t.name).sort();
out.echo = await client.callTool({ name: "echo", arguments: { k: "v" } });
out.guarded = await client.callTool({ name: "guarded", arguments: { target: "prod" } });
try {
  await client.callTool({ name: "nope", arguments: {} });
} catch (error) {
  out.unknown = String(error.message);
}
out.asked = asked;
process.stdout.write("ready\n");
const timeout = new Promise((resolve) => setTimeout(() => resolve(false), 10000));
out.listChanged = await Promise.race([told, timeout]);
out.listedAfter = (await client.listTools()).tools.map((t) => t.name).sort();
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
