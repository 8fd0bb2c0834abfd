// A TypeScript SDK client of taskgate, for interop/tssdk's tests: it
// connects to URL with the bearer KEY (protocol 2025-11-25, the SDK's
// newest), lists the tools, and calls TOOL with the JSON ARGS as a task
// with client.experimental.tasks.callToolStream. Every message of the
// stream is printed as one JSON line. With "cancel" as the fifth argument
// it cancels the task once a line arrives on stdin after the task was
// created, prints tasks/cancel's answer, and then tasks/get's.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createInterface } from 'node:readline';

const [url, key, tool, args, mode] = process.argv.slice(2);
const print = (v) => process.stdout.write(JSON.stringify(v) + '\n');

const client = new Client({ name: 'taskgate-interop-tssdk', version: '1.0.0' }, { capabilities: { tasks: { cancel: {}, list: {} } } });
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
await client.connect(transport);
print({ type: 'connected', protocolVersion: transport.protocolVersion ?? null });
const { tools } = await client.listTools();
print({ type: 'tools', tools: tools.map((t) => ({ name: t.name, taskSupport: t.execution?.taskSupport ?? null })) });

for await (const message of client.experimental.tasks.callToolStream({ name: tool, arguments: JSON.parse(args) })) {
	switch (message.type) {
		case 'taskCreated':
			print({ type: message.type, taskId: message.task.taskId, status: message.task.status, ttl: message.task.ttl });
			if (mode === 'cancel') {
				// The stream goes on polling while the cancel waits for its cue.
				const lines = createInterface({ input: process.stdin });
				lines.once('line', async () => {
					lines.close();
					print({ type: 'cancelled', answer: await client.experimental.tasks.cancelTask(message.task.taskId) });
					print({ type: 'afterCancel', answer: await client.experimental.tasks.getTask(message.task.taskId) });
				});
			}
			break;
		case 'taskStatus':
			print({ type: message.type, taskId: message.task.taskId, status: message.task.status, ttl: message.task.ttl });
			break;
		case 'result':
			print({ type: message.type, result: message.result });
			break;
		case 'error':
			print({ type: message.type, error: String(message.error?.message ?? message.error) });
			break;
	}
}
await client.close();
