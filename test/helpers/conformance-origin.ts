import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import {
  completable,
  createMcpHandler,
  createRequestStateCodec,
  type EventStore,
  fromJsonSchema,
  inputRequired,
  inputResponse,
  isLegacyRequest,
  type JSONRPCMessage,
  McpServer,
  ProtocolError,
  ProtocolErrorCode,
  ResourceTemplate,
  type ServerContext,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * The MCP server the official conformance suite (`@modelcontextprotocol/conformance`) tests, on
 * the TypeScript SDK v2, written from `conformance list` and the scenarios' descriptions. It
 * speaks both eras on one URL: 2026-07-28 requests go to `createMcpHandler` (stateless,
 * `server/discover`, `subscriptions/listen`, multi-round results); 2025 requests to a
 * sessionful streamable HTTP transport with an event store (sessions, DELETE, the GET stream,
 * SSE resumption), as the SDK documents for keeping a 2025 deployment next to a modern one.
 * Like any localhost server without authentication it refuses foreign `Host` / `Origin`
 * headers (DNS rebinding).
 */
export interface ConformanceOrigin {
  url: string;
  close(): Promise<void>;
}

/** A 1×1 red PNG and a tiny silent WAV: the media the content scenarios ask for. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';

const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema conditional keyword, never awaited
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
} as const;

const HEADER_MIRRORED = {
  type: 'object' as const,
  properties: {
    region: { type: 'string', description: 'Where to run', 'x-mcp-header': 'Region' },
    query: { type: 'string', description: 'What to run' },
  },
  required: ['region', 'query'],
};

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

/** Host and Origin, when present, must name this machine. */
function fromLocalhost(host: string | undefined, origin: string | undefined): boolean {
  const hostname = (value: string) => {
    try {
      return new URL(value).hostname;
    } catch {
      return '';
    }
  };
  if (host !== undefined && !LOCAL_HOSTS.has(hostname(`http://${host}`))) return false;
  if (origin !== undefined && !LOCAL_HOSTS.has(hostname(origin))) return false;
  return true;
}

/** Events kept per stream so a 2025 client can resume with `Last-Event-ID`. */
class MemoryEventStore implements EventStore {
  private readonly events = new Map<string, { streamId: string; message: JSONRPCMessage }>();
  private next = 0;

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    const id = `${streamId}_${String(++this.next).padStart(8, '0')}`;
    this.events.set(id, { streamId, message });
    return id;
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    const last = this.events.get(lastEventId);
    if (last === undefined) return '';
    for (const [id, event] of this.events) {
      if (event.streamId === last.streamId && id > lastEventId) await send(id, event.message);
    }
    return last.streamId;
  }
}

export async function startConformanceOrigin(): Promise<ConformanceOrigin> {
  const stateCodec = createRequestStateCodec<{ tool: string; round: number }>({
    key: randomUUID().repeat(2),
  });
  let notifyToolsChanged = () => {};
  let notifyPromptsChanged = () => {};

  const factory = () => {
    const server = new McpServer(
      { name: 'conformance-origin', version: '1.0.0' },
      {
        capabilities: {
          logging: {},
          completions: {},
          tools: { listChanged: true },
          prompts: { listChanged: true },
          resources: { subscribe: true, listChanged: true },
        },
        requestState: { verify: (state, ctx) => stateCodec.verify(state, ctx) },
      },
    );
    registerTools(server);
    registerResources(server);
    registerPrompts(server);
    // 2025 resource subscriptions: accepted and tracked per session (2026-07-28 has
    // subscriptions/listen instead, which createMcpHandler serves).
    const watched = new Set<string>();
    server.server.setRequestHandler('resources/subscribe', async (request) => {
      watched.add(request.params.uri);
      return {};
    });
    server.server.setRequestHandler('resources/unsubscribe', async (request) => {
      watched.delete(request.params.uri);
      return {};
    });
    return server;
  };

  const registerTools = (server: McpServer) => {
    server.registerTool('test_simple_text', { description: 'Returns simple text' }, async () =>
      text('This is a simple text response for testing.'),
    );
    server.registerTool('test_image_content', { description: 'Returns an image' }, async () => ({
      content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
    }));
    server.registerTool('test_audio_content', { description: 'Returns audio' }, async () => ({
      content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
    }));
    server.registerTool(
      'test_embedded_resource',
      { description: 'Returns an embedded resource' },
      async () => ({
        content: [
          {
            type: 'resource',
            resource: {
              uri: 'test://embedded-resource',
              mimeType: 'text/plain',
              text: 'This is an embedded resource content.',
            },
          },
        ],
      }),
    );
    server.registerTool(
      'test_multiple_content_types',
      { description: 'Returns mixed content' },
      async () => ({
        content: [
          { type: 'text', text: 'Multiple content types test:' },
          { type: 'image', data: PNG, mimeType: 'image/png' },
          {
            type: 'resource',
            resource: {
              uri: 'test://mixed-content-resource',
              mimeType: 'application/json',
              text: JSON.stringify({ test: 'data', value: 123 }),
            },
          },
        ],
      }),
    );
    server.registerTool('test_error_handling', { description: 'Always fails' }, async () => ({
      isError: true,
      ...text('This tool intentionally returns an error for testing'),
    }));
    server.registerTool('test_tool_with_logging', { description: 'Logs while it runs' }, async (ctx) => {
      await ctx.mcpReq.log('info', 'Tool execution started');
      await sleep(50);
      await ctx.mcpReq.log('info', 'Tool processing data');
      await sleep(50);
      await ctx.mcpReq.log('info', 'Tool execution completed');
      return text('Logging tool finished');
    });
    server.registerTool('test_tool_with_progress', { description: 'Reports progress' }, async (ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (progressToken !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken, progress, total: 100 },
          });
        }
        if (progress < 100) await sleep(50);
      }
      return text('Progress tool finished');
    });
    server.registerTool(
      'test_sampling',
      { description: 'Asks the client to sample', inputSchema: z.object({ prompt: z.string() }) },
      async ({ prompt }, ctx) => {
        const answer = await ctx.mcpReq.requestSampling({
          messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
          maxTokens: 100,
        });
        const content = answer.content as { type: string; text?: string };
        return text(`LLM response: ${content.type === 'text' ? content.text : JSON.stringify(content)}`);
      },
    );
    server.registerTool(
      'test_elicitation',
      { description: 'Asks the user', inputSchema: z.object({ message: z.string() }) },
      async ({ message }, ctx) => {
        const answer = await ctx.mcpReq.elicitInput({
          message,
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        });
        return text(
          `User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
        );
      },
    );
    server.registerTool(
      'test_elicitation_sep1034_defaults',
      { description: 'Elicitation with defaults' },
      async (ctx) => {
        const answer = await ctx.mcpReq.elicitInput({
          message: 'Please review your details',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', default: 'John Doe' },
              age: { type: 'integer', default: 30 },
              score: { type: 'number', default: 95.5 },
              status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
              verified: { type: 'boolean', default: true },
            },
          },
        });
        return text(
          `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
        );
      },
    );
    server.registerTool(
      'test_elicitation_sep1330_enums',
      { description: 'Elicitation with enums' },
      async (ctx) => {
        const answer = await ctx.mcpReq.elicitInput({
          message: 'Pick options',
          requestedSchema: {
            type: 'object',
            properties: {
              untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
              titledSingle: {
                type: 'string',
                oneOf: [
                  { const: 'value1', title: 'First Option' },
                  { const: 'value2', title: 'Second Option' },
                  { const: 'value3', title: 'Third Option' },
                ],
              },
              legacyEnum: {
                type: 'string',
                enum: ['opt1', 'opt2', 'opt3'],
                enumNames: ['Option One', 'Option Two', 'Option Three'],
              },
              untitledMulti: {
                type: 'array',
                items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
              },
              titledMulti: {
                type: 'array',
                items: {
                  anyOf: [
                    { const: 'value1', title: 'First Choice' },
                    { const: 'value2', title: 'Second Choice' },
                    { const: 'value3', title: 'Third Choice' },
                  ],
                },
              },
            },
            // biome-ignore lint/suspicious/noExplicitAny: the legacy enumNames form is outside the SDK's type
          } as any,
        });
        return text(
          `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
        );
      },
    );
    server.registerTool(
      'json_schema_2020_12_tool',
      {
        description: 'Tool with JSON Schema 2020-12 features',
        inputSchema: fromJsonSchema(JSON_SCHEMA_2020_12),
      },
      async () => text('ok'),
    );
    // SSE polling (2025): the server closes the call's stream after a first event; the client
    // comes back with Last-Event-ID and gets the result from the event store.
    server.registerTool('test_reconnection', { description: 'Closes its stream mid-call' }, async (ctx) => {
      await sleep(50);
      ctx.http?.closeSSE?.();
      await sleep(200);
      return text('Reconnection test completed');
    });
    // Needs sampling: it asks the client for a completion. A 2026-07-28 request that did not
    // declare sampling is refused by the SDK with -32021 (MissingRequiredClientCapability).
    server.registerTool(
      'test_missing_capability',
      { description: 'Needs the sampling capability' },
      async (ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'completion');
        if (answer.kind === 'sampling') return text('sampled');
        return inputRequired({
          inputRequests: {
            completion: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }],
              maxTokens: 10,
            }),
          },
        });
      },
    );
    server.registerTool(
      'test_streaming_elicitation',
      { description: 'Asks the user mid-call' },
      async (ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'user_name');
        if (answer.kind === 'elicit') return text(`Hello, ${String(answer.content?.name ?? 'stranger')}`);
        return inputRequired({
          inputRequests: {
            user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema }),
          },
        });
      },
    );
    server.registerTool('test_logging_tool', { description: 'Logs at info level' }, async (ctx) => {
      await ctx.mcpReq.log('info', 'a log line the client may not have asked for');
      return text('logged');
    });
    // Custom headers (SEP-2243): a parameter mirrored into an Mcp-Param-Region header.
    server.registerTool(
      'test_custom_headers',
      {
        description: 'A tool with a header-mirrored parameter',
        inputSchema: fromJsonSchema(HEADER_MIRRORED),
      },
      async (args) => text(`ran ${JSON.stringify(args)}`),
    );
    server.registerTool(
      'test_trigger_tool_change',
      { description: 'Announces a tool list change' },
      async () => {
        notifyToolsChanged();
        server.sendToolListChanged();
        return text('tools changed');
      },
    );
    server.registerTool(
      'test_trigger_prompt_change',
      { description: 'Announces a prompt list change' },
      async () => {
        notifyPromptsChanged();
        server.sendPromptListChanged();
        return text('prompts changed');
      },
    );
    registerMultiRoundTools(server);
  };

  const nameSchema: { type: 'object'; properties: Record<string, { type: 'string' }>; required: string[] } = {
    type: 'object',
    properties: { name: { type: 'string' } },
    required: ['name'],
  };

  const registerMultiRoundTools = (server: McpServer) => {
    server.registerTool(
      'test_input_required_result_elicitation',
      { description: 'Asks a name' },
      async (ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'user_name');
        if (
          answer.kind !== 'elicit' ||
          answer.action !== 'accept' ||
          typeof answer.content?.name !== 'string'
        ) {
          if (ctx.mcpReq.inputResponses !== undefined && !isObjectOfObjects(ctx.mcpReq.inputResponses)) {
            throw new ProtocolError(
              ProtocolErrorCode.InvalidParams,
              'inputResponses must map keys to responses',
            );
          }
          return inputRequired({
            inputRequests: {
              user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema }),
            },
          });
        }
        return text(`Hello, ${answer.content.name}!`);
      },
    );
    server.registerTool(
      'test_input_required_result_sampling',
      { description: 'Asks a model' },
      async (ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'capital_question');
        if (answer.kind !== 'sampling') {
          return inputRequired({
            inputRequests: {
              capital_question: inputRequired.createMessage({
                messages: [
                  { role: 'user', content: { type: 'text', text: 'What is the capital of France?' } },
                ],
                maxTokens: 100,
              }),
            },
          });
        }
        const content = answer.result.content as { type: string; text?: string };
        return text(`The model said: ${content.text ?? JSON.stringify(content)}`);
      },
    );
    server.registerTool(
      'test_input_required_result_list_roots',
      { description: 'Asks the roots' },
      async (ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
        if (answer.kind !== 'roots') {
          return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
        }
        return text(`Roots: ${answer.roots.map((root) => root.uri).join(', ')}`);
      },
    );
    server.registerTool(
      'test_input_required_result_request_state',
      { description: 'Keeps state' },
      async (ctx) => {
        const state = ctx.mcpReq.requestState<{ tool: string; round: number }>();
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
        if (state?.tool === 'request_state' && answer.kind === 'elicit') return text('state-ok: confirmed');
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: 'Please confirm',
              requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
            }),
          },
          requestState: await stateCodec.mint({ tool: 'request_state', round: 1 }, ctx),
        });
      },
    );
    server.registerTool(
      'test_input_required_result_multiple_inputs',
      { description: 'Asks three' },
      async (ctx) => {
        const responses = ctx.mcpReq.inputResponses;
        const kinds = ['user_name', 'greeting', 'client_roots'].map(
          (key) => inputResponse(responses, key).kind,
        );
        if (kinds.every((kind) => kind !== 'missing')) return text('all inputs received');
        return inputRequired({
          inputRequests: {
            user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema }),
            greeting: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
              maxTokens: 50,
            }),
            client_roots: inputRequired.listRoots(),
          },
          requestState: await stateCodec.mint({ tool: 'multiple_inputs', round: 1 }, ctx),
        });
      },
    );
    server.registerTool(
      'test_input_required_result_multi_round',
      { description: 'Asks twice' },
      async (ctx) => {
        const state = ctx.mcpReq.requestState<{ tool: string; round: number }>();
        const responses = ctx.mcpReq.inputResponses;
        if (state?.round === 2 && inputResponse(responses, 'step2').kind === 'elicit') {
          return text('multi-round complete');
        }
        if (state?.round === 1 && inputResponse(responses, 'step1').kind === 'elicit') {
          return inputRequired({
            inputRequests: {
              step2: inputRequired.elicit({
                message: 'Step 2: What is your favorite color?',
                requestedSchema: {
                  type: 'object',
                  properties: { color: { type: 'string' } },
                  required: ['color'],
                },
              }),
            },
            requestState: await stateCodec.mint({ tool: 'multi_round', round: 2 }, ctx),
          });
        }
        return inputRequired({
          inputRequests: {
            step1: inputRequired.elicit({
              message: 'Step 1: What is your name?',
              requestedSchema: nameSchema,
            }),
          },
          requestState: await stateCodec.mint({ tool: 'multi_round', round: 1 }, ctx),
        });
      },
    );
    server.registerTool(
      'test_input_required_result_tampered_state',
      { description: 'Signs its state' },
      async (ctx) => {
        // A tampered state never reaches here: the server's requestState.verify refuses it (-32602).
        const state = ctx.mcpReq.requestState<{ tool: string; round: number }>();
        if (state?.tool === 'tampered_state') return text('state verified');
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: 'Please confirm',
              requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
            }),
          },
          requestState: await stateCodec.mint({ tool: 'tampered_state', round: 1 }, ctx),
        });
      },
    );
    server.registerTool(
      'test_input_required_result_capabilities',
      { description: 'Asks what it may' },
      async (ctx) => {
        const declared = declaredCapabilities(ctx) ?? {};
        if (ctx.mcpReq.inputResponses !== undefined) return text('capabilities respected');
        const requests: Record<string, ReturnType<typeof inputRequired.listRoots>> = {};
        if (declared.elicitation !== undefined) {
          requests.user_name = inputRequired.elicit({
            message: 'What is your name?',
            requestedSchema: nameSchema,
          });
        }
        if (declared.sampling !== undefined) {
          requests.greeting = inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
            maxTokens: 50,
          });
        }
        if (declared.roots !== undefined) requests.client_roots = inputRequired.listRoots();
        if (Object.keys(requests).length === 0) return text('nothing to ask');
        return inputRequired({ inputRequests: requests });
      },
    );
  };

  const registerResources = (server: McpServer) => {
    server.registerResource(
      'static-text',
      'test://static-text',
      { description: 'A static text resource', mimeType: 'text/plain' },
      async (uri) => ({
        contents: [
          { uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
        ],
      }),
    );
    server.registerResource(
      'static-binary',
      'test://static-binary',
      { description: 'A static binary resource', mimeType: 'image/png' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }),
    );
    server.registerResource(
      'watched-resource',
      'test://watched-resource',
      { description: 'A resource clients subscribe to', mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'watched' }] }),
    );
    server.registerResource(
      'template',
      new ResourceTemplate('test://template/{id}/data', { list: undefined }),
      { description: 'A resource template', mimeType: 'application/json' },
      async (uri, { id }) => ({
        contents: [
          {
            uri: uri.href,
            mimeType: 'application/json',
            text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
          },
        ],
      }),
    );
  };

  const registerPrompts = (server: McpServer) => {
    server.registerPrompt('test_simple_prompt', { description: 'A simple prompt' }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
    }));
    server.registerPrompt(
      'test_prompt_with_arguments',
      {
        description: 'A prompt with arguments',
        argsSchema: z.object({
          arg1: completable(z.string().describe('First test argument'), (value) =>
            ['paris', 'park', 'party'].filter((word) => word.startsWith(value)),
          ),
          arg2: z.string().describe('Second test argument'),
        }),
      },
      async ({ arg1, arg2 }) => ({
        messages: [
          {
            role: 'user',
            content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
          },
        ],
      }),
    );
    server.registerPrompt(
      'test_prompt_with_embedded_resource',
      { description: 'A prompt with a resource', argsSchema: z.object({ resourceUri: z.string() }) },
      async ({ resourceUri }) => ({
        messages: [
          {
            role: 'user',
            content: {
              type: 'resource',
              resource: {
                uri: resourceUri,
                mimeType: 'text/plain',
                text: 'Embedded resource content for testing.',
              },
            },
          },
          { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
        ],
      }),
    );
    server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }));
    server.registerPrompt(
      'test_input_required_result_prompt',
      { description: 'A prompt that asks for context' },
      async (ctx: ServerContext) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'user_context');
        if (answer.kind !== 'elicit') {
          return inputRequired({
            inputRequests: {
              user_context: inputRequired.elicit({
                message: 'What context should the prompt use?',
                requestedSchema: {
                  type: 'object',
                  properties: { context: { type: 'string' } },
                  required: ['context'],
                },
              }),
            },
          });
        }
        return {
          messages: [
            {
              role: 'user',
              content: { type: 'text', text: `Context: ${JSON.stringify(answer.content ?? {})}` },
            },
          ],
        };
      },
    );
  };

  const modern = createMcpHandler(factory, { legacy: 'reject' });
  notifyToolsChanged = () => modern.notify.toolsChanged();
  notifyPromptsChanged = () => modern.notify.promptsChanged();

  // 2025: one transport and server per session.
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const legacy = async (request: Request): Promise<Response> => {
    const sessionId = request.headers.get('mcp-session-id');
    if (sessionId !== null) {
      const transport = sessions.get(sessionId);
      if (transport === undefined) {
        return Response.json(
          { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } },
          { status: 404 },
        );
      }
      return transport.handleRequest(request);
    }
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new MemoryEventStore(),
      retryInterval: 100,
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
      },
    });
    await factory().connect(transport);
    return transport.handleRequest(request);
  };

  const http: Server = createServer(async (req, res) => {
    if (!fromLocalhost(req.headers.host, req.headers.origin)) {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: null,
          error: { code: -32000, message: 'Forbidden host or origin' },
        }),
      );
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
    }
    const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, {
      method: req.method ?? 'GET',
      headers,
      ...(body.length > 0 && req.method !== 'GET' && req.method !== 'HEAD' ? { body } : {}),
    });
    try {
      const response = (await isLegacyRequest(request.clone()))
        ? await legacy(request)
        : await modern.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body !== null) {
        for await (const chunk of response.body) {
          res.write(chunk);
        }
      }
      res.end();
    } catch (error) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    }
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const address = http.address();
  if (address === null || typeof address === 'string') throw new Error('conformance origin did not listen');
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    async close() {
      await modern.close();
      await Promise.all([...sessions.values()].map((transport) => transport.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

function isObjectOfObjects(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every(
      (entry) => typeof entry === 'object' && entry !== null && !Array.isArray(entry),
    )
  );
}

/** The capabilities a 2026-07-28 request declared in its `_meta` (undefined on a 2025 request). */
function declaredCapabilities(ctx: ServerContext): Record<string, unknown> | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return envelope?.['io.modelcontextprotocol/clientCapabilities'] as Record<string, unknown> | undefined;
}
