#!/usr/bin/env node
// A Node.js client of Penguin's EngineService, to show that any gRPC
// language can drive a session: it loads the .proto files from proto/,
// creates a session whose every tool call needs approval, runs one task,
// answers each approval request it reads from the stream, and prints every
// event as one JSON line. It exits 0 only when the task completed after at
// least one approved tool call, so a test can run it as is.
//
//   node session.js --engine 127.0.0.1:7420 --provider openai --model gpt-4o \
//     --workspace /path/to/dir --prompt "List the files"
//
// The bearer token, when the server wants one, comes from PENGUIN_AUTH_TOKEN.
// --deny answers every approval with deny instead of allow.
'use strict';

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function parseArgs(argv) {
  const opts = { engine: '127.0.0.1:7420', decision: 'DECISION_ALLOW', timeoutMs: 60000 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    switch (flag) {
      case '--engine': opts.engine = value(); break;
      case '--provider': opts.provider = value(); break;
      case '--model': opts.model = value(); break;
      case '--workspace': opts.workspace = value(); break;
      case '--prompt': opts.prompt = value(); break;
      case '--timeout-ms': opts.timeoutMs = Number(value()); break;
      case '--deny': opts.decision = 'DECISION_DENY'; break;
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  for (const need of ['provider', 'model', 'workspace', 'prompt']) {
    if (!opts[need]) throw new Error(`--${need} is required`);
  }
  return opts;
}

// loadEngine reads engine.proto (and what it imports) from the repository's
// proto/ directory: the .proto files are the contract, no generated code.
function loadEngine() {
  const protoDir = path.resolve(__dirname, '..', '..', 'proto');
  const def = protoLoader.loadSync('penguin/v1/engine.proto', {
    includeDirs: [protoDir],
    keepCase: true, // snake_case field names, as in the .proto files
    longs: String, // int64 sequence numbers as strings
    enums: String, // enum values by name
    defaults: false,
    oneofs: true, // a oneof's set field is named in a virtual property
  });
  return grpc.loadPackageDefinition(def).penguin.v1.EngineService;
}

function metadata() {
  const md = new grpc.Metadata();
  const token = process.env.PENGUIN_AUTH_TOKEN;
  if (token) md.set('authorization', `Bearer ${token}`);
  return md;
}

// unary turns a callback-style unary call into a promise.
function unary(client, method, request, deadlineMs) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata(), { deadline: Date.now() + deadlineMs }, (err, resp) => {
      if (err) reject(new Error(`${method}: ${err.details || err.message}`));
      else resolve(resp);
    });
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const EngineService = loadEngine();
  const client = new EngineService(opts.engine, grpc.credentials.createInsecure());
  const deadline = Date.now() + opts.timeoutMs;

  const created = await unary(client, 'CreateSession', {
    model: { provider: opts.provider, model_id: opts.model },
    workspace: opts.workspace,
    approval_mode: 'APPROVAL_MODE_ALWAYS_ASK',
  }, 10000);
  const sessionId = created.session.session_id;
  console.log(JSON.stringify({ client: 'session_created', session_id: sessionId }));

  const seen = { approvals: 0, toolOutputs: 0, lastSequence: 0, final: null, texts: [] };
  const pending = [];
  await new Promise((resolve, reject) => {
    const call = client.Run({ session_id: sessionId, prompt: opts.prompt }, metadata(), { deadline });
    call.on('data', (resp) => {
      const ev = resp.event;
      const seq = Number(ev.sequence);
      if (seq <= seen.lastSequence) {
        reject(new Error(`sequence ${seq} after ${seen.lastSequence}: events out of order`));
        return;
      }
      seen.lastSequence = seq;
      console.log(JSON.stringify(ev));
      if (ev.event === 'approval_request') {
        seen.approvals++;
        const callId = ev.approval_request.tool_call.tool_call_id;
        pending.push(unary(client, 'Approve', {
          session_id: sessionId,
          tool_call_id: callId,
          decision: opts.decision,
          origin: ev.approval_request.origin || [],
        }, 10000).then(() => console.log(JSON.stringify({ client: 'approved', tool_call_id: callId, decision: opts.decision }))));
      } else if (ev.event === 'message') {
        const m = ev.message;
        if (m.payload === 'tool_call_output') seen.toolOutputs++;
        if (m.payload === 'text' && m.text.role === 'ROLE_ASSISTANT') seen.texts.push(m.text.text);
      } else if (ev.event === 'state' && ev.state.state === 'SESSION_STATE_IDLE') {
        seen.final = ev.state;
      }
    });
    call.on('error', reject);
    call.on('end', resolve);
  });
  await Promise.all(pending);

  const history = await unary(client, 'GetHistory', { session_id: sessionId }, 10000);
  const summary = {
    client: 'summary',
    session_id: sessionId,
    approvals: seen.approvals,
    tool_outputs: seen.toolOutputs,
    status: seen.final && seen.final.status,
    last_text: seen.texts[seen.texts.length - 1] || '',
    history_events: (history.events || []).length,
  };
  console.log(JSON.stringify(summary));
  client.close();

  const problems = [];
  if (seen.approvals === 0) problems.push('no approval request arrived');
  if (seen.toolOutputs === 0) problems.push('no tool output arrived');
  if (!seen.final) problems.push('the stream ended before the session went idle');
  else if (seen.final.status !== 'STOP_REASON_COMPLETED') problems.push(`the task ended ${seen.final.status}: ${seen.final.message || ''}`);
  if (summary.history_events === 0) problems.push('the history is empty');
  if (problems.length > 0) throw new Error(problems.join('; '));
}

main().catch((err) => {
  console.error(`session.js: ${err.message}`);
  process.exit(1);
});
