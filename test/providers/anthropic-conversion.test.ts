import { describe, expect, test } from 'bun:test'
import { convertAnthropicResponse } from '../../providers/anthropic/convert-anthropic-response.ts'
import {
  convertAnthropicStream,
  type AnthropicStreamState,
} from '../../providers/anthropic/convert-anthropic-stream.ts'
import { convertToAnthropicMessages } from '../../providers/anthropic/convert-to-anthropic-messages.ts'
import { mapAnthropicStopReason } from '../../providers/anthropic/map-anthropic-stop-reason.ts'
import { mapAnthropicUsage } from '../../providers/anthropic/map-anthropic-usage.ts'
import { mapOpenAIUsage } from '../../providers/openai/map-openai-usage.ts'
import { prepareOpenAIBody } from '../../providers/openai/prepare-openai-body.ts'
import type { SseEvent } from '../../providers/read-sse-events.ts'
import { UpstreamStreamError } from '../../providers/upstream-stream-error.ts'

describe('OpenAI chat body → Anthropic Messages body', () => {
  test('system messages, stop, limits and sampling', () => {
    const converted = convertToAnthropicMessages({
      model: 'claude-x',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'developer', content: [{ type: 'text', text: 'No lists.' }] },
        { role: 'user', content: 'Hi' },
      ],
      stop: 'END',
      temperature: 0.2,
      top_p: 0.9,
      user: 'u-1',
      seed: 4,
    })
    expect(converted).toEqual({
      ok: true,
      body: {
        model: 'claude-x',
        max_tokens: 4096,
        system: 'Be brief.\n\nNo lists.',
        messages: [{ role: 'user', content: 'Hi' }],
        stop_sequences: ['END'],
        temperature: 0.2,
        top_p: 0.9,
        metadata: { user_id: 'u-1' },
      },
    })
    const limited = convertToAnthropicMessages({
      model: 'm',
      messages: [{ role: 'user', content: 'Hi' }],
      max_completion_tokens: 9,
    })
    expect(limited.ok && limited.body.max_tokens).toBe(9)
  })

  test('tool calls, tool results, images, and merged turns', () => {
    const converted = convertToAnthropicMessages({
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is here?' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          ],
        },
        { role: 'user', content: 'And the weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_1',
              type: 'function',
              function: { name: 'weather', arguments: '{"city":"Oslo"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'rain' },
      ],
      tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
      tool_choice: 'required',
      parallel_tool_calls: false,
    })
    if (!converted.ok) throw new Error(converted.message)
    expect(converted.body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is here?' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          { type: 'text', text: 'And the weather?' },
        ],
      },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Oslo' } }],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'rain' }] },
    ])
    expect(converted.body.tools).toEqual([{ name: 'weather', input_schema: { type: 'object' } }])
    expect(converted.body.tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true })
  })

  test('what cannot be converted is a value, not an exception', () => {
    expect(
      convertToAnthropicMessages({ model: 'm', messages: [{ role: 'function', content: 'x' }] }),
    ).toMatchObject({
      ok: false,
    })
    const badArguments = convertToAnthropicMessages({
      model: 'm',
      messages: [
        { role: 'assistant', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '{' } }] },
      ],
    })
    expect(badArguments).toMatchObject({
      ok: false,
      message: expect.stringContaining('not valid JSON'),
    })
  })

  test('response_format: json_schema → output_config.format, text dropped, json_object refused', () => {
    const messages = [{ role: 'user', content: 'Hi' }]
    const schema = { type: 'object', properties: { a: { type: 'string' } } }
    const structured = convertToAnthropicMessages({
      model: 'm',
      messages,
      response_format: { type: 'json_schema', json_schema: { name: 'a', schema, strict: true } },
    })
    expect(structured).toMatchObject({
      ok: true,
      body: { output_config: { format: { type: 'json_schema', schema } } },
    })
    expect(structured.ok && 'response_format' in structured.body).toBe(false)
    const text = convertToAnthropicMessages({
      model: 'm',
      messages,
      response_format: { type: 'text' },
    })
    expect(text.ok && 'output_config' in text.body).toBe(false)
    expect(
      convertToAnthropicMessages({
        model: 'm',
        messages,
        response_format: { type: 'json_object' },
      }),
    ).toMatchObject({ ok: false, message: expect.stringContaining('use json_schema') })
  })
})

describe('Anthropic answers → OpenAI', () => {
  test('stop reasons map to finish reasons, keeping the raw value', () => {
    const cases: [string | null, string][] = [
      ['end_turn', 'stop'],
      ['stop_sequence', 'stop'],
      ['max_tokens', 'length'],
      ['tool_use', 'tool_calls'],
      ['refusal', 'content_filter'],
      [null, 'stop'],
      ['something_new', 'stop'],
    ]
    for (const [raw, unified] of cases) {
      expect(mapAnthropicStopReason(raw)).toEqual({ unified: unified as any, raw })
    }
  })

  test('a tool_use answer becomes tool_calls, cache reads count as input and as their own class', () => {
    const converted = convertAnthropicResponse(
      {
        id: 'msg_1',
        model: 'claude-x',
        content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Oslo' } }],
        stop_reason: 'tool_use',
        usage: { input_tokens: 10, cache_read_input_tokens: 5, output_tokens: 7 },
      },
      1_700_000_000,
    )
    if (!converted.ok) throw new Error(converted.message)
    expect(converted.usage).toEqual({ input_tokens: 15, output_tokens: 7, cached_input_tokens: 5 })
    expect(converted.body).toEqual({
      id: 'msg_1',
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'claude-x',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            refusal: null,
            tool_calls: [
              {
                id: 'toolu_1',
                type: 'function',
                function: { name: 'weather', arguments: '{"city":"Oslo"}' },
              },
            ],
          },
          logprobs: null,
          finish_reason: 'tool_calls',
        },
      ],
      usage: {
        prompt_tokens: 15,
        completion_tokens: 7,
        total_tokens: 22,
        prompt_tokens_details: { cached_tokens: 5, cache_write_tokens: 0 },
      },
    })
    expect(convertAnthropicResponse({ type: 'message' }, 0).ok).toBe(false)
  })

  test('stream events: text, tool calls, finish reason, usage, mid-stream errors', async () => {
    const events = (list: object[]): AsyncIterable<SseEvent> =>
      (async function* () {
        for (const data of list) yield { event: null, data: JSON.stringify(data) }
      })()
    const state: AnthropicStreamState = { usage: null }
    const chunks: any[] = []
    const source = events([
      {
        type: 'message_start',
        message: { id: 'msg_1', model: 'c', usage: { input_tokens: 9, output_tokens: 1 } },
      },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Checking' } },
      {
        type: 'content_block_start',
        index: 1,
        content_block: { type: 'tool_use', id: 't1', name: 'weather' },
      },
      {
        type: 'content_block_delta',
        index: 1,
        delta: { type: 'input_json_delta', partial_json: '{"city":' },
      },
      {
        type: 'content_block_delta',
        index: 1,
        delta: { type: 'input_json_delta', partial_json: '"Oslo"}' },
      },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 12 } },
      { type: 'message_stop' },
    ])
    for await (const chunk of convertAnthropicStream(source, state, 1)) chunks.push(chunk)
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content).filter(Boolean)).toEqual([
      'Checking',
    ])
    const toolDeltas = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? [])
    expect(toolDeltas[0]).toMatchObject({ index: 0, id: 't1', function: { name: 'weather' } })
    expect(toolDeltas.map((delta) => delta.function.arguments).join('')).toBe('{"city":"Oslo"}')
    expect(chunks.at(-2).choices[0].finish_reason).toBe('tool_calls')
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 9, completion_tokens: 12 },
    })
    expect(state.usage).toEqual({ input_tokens: 9, output_tokens: 12 })
    // The role comes once, with the first block: content "" before text.
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' })
    expect(chunks.filter((chunk) => chunk.choices[0]?.delta.role)).toHaveLength(1)

    // A tool call first: the role with content null, as OpenAI streams a tool-only answer.
    const toolOnly: any[] = []
    for await (const chunk of convertAnthropicStream(
      events([
        { type: 'message_start', message: { id: 'msg_2', model: 'c', usage: {} } },
        {
          type: 'content_block_start',
          index: 0,
          content_block: { type: 'tool_use', id: 't2', name: 'weather' },
        },
        { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 3 } },
        { type: 'message_stop' },
      ]),
      { usage: null },
      1,
    ))
      toolOnly.push(chunk)
    expect(toolOnly[0].choices[0].delta).toMatchObject({ role: 'assistant', content: null })
    expect(toolOnly[0].choices[0].delta.tool_calls[0]).toMatchObject({ id: 't2' })

    const failing = events([
      { type: 'error', error: { type: 'overloaded_error', message: 'busy' } },
    ])
    const error = await (async () => {
      for await (const _ of convertAnthropicStream(failing, { usage: null }, 1)) void _
    })().catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(UpstreamStreamError)
    expect((error as UpstreamStreamError).error).toMatchObject({
      kind: 'server_error',
      retryable: true,
    })
  })
})

describe('a streamed tool call whose JSON comes in no piece that is not blank', () => {
  const argumentsOf = async (pieces: string[], input?: Record<string, unknown>) => {
    const list: object[] = [
      { type: 'message_start', message: { id: 'msg_1', model: 'c', usage: {} } },
      {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'tool_use', id: 't1', name: 'now', input: input ?? {} },
      },
      ...pieces.map((partial_json) => ({
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'input_json_delta', partial_json },
      })),
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 1 } },
      { type: 'message_stop' },
    ]
    async function* source(): AsyncIterable<SseEvent> {
      for (const event of list)
        yield { event: (event as { type: string }).type, data: JSON.stringify(event) }
    }
    let text = ''
    for await (const chunk of convertAnthropicStream(
      source(),
      { usage: null },
      1,
    ) as AsyncIterable<any>)
      for (const call of chunk.choices[0]?.delta.tool_calls ?? [])
        text += call.function.arguments ?? ''
    return text
  }

  test('no arguments is "{}", a blank piece too; an input sent whole in the start is that input', async () => {
    expect(await argumentsOf([''])).toBe('{}')
    expect(await argumentsOf([])).toBe('{}')
    expect(JSON.parse(await argumentsOf([' ']))).toEqual({})
    expect(await argumentsOf([], { city: 'Oslo' })).toBe('{"city":"Oslo"}')
    // Pieces that say something: they alone, nothing added.
    expect(await argumentsOf(['', '{"city":', '"Oslo"}'])).toBe('{"city":"Oslo"}')
  })
})

describe('prompt caching (docs/pricing.md)', () => {
  test('Anthropic usage keeps each class: reads, 5-minute and 1-hour writes, in OpenAI shape too', () => {
    const converted = convertAnthropicResponse(
      {
        id: 'msg_1',
        model: 'claude',
        content: [{ type: 'text', text: 'hi' }],
        stop_reason: 'end_turn',
        usage: {
          input_tokens: 10,
          cache_read_input_tokens: 100,
          cache_creation_input_tokens: 70,
          cache_creation: { ephemeral_5m_input_tokens: 30, ephemeral_1h_input_tokens: 40 },
          output_tokens: 7,
        },
      },
      1,
    )
    if (!converted.ok) throw new Error(converted.message)
    expect(converted.usage).toEqual({
      input_tokens: 180,
      output_tokens: 7,
      cached_input_tokens: 100,
      cache_write_tokens: 30,
      cache_write_1h_tokens: 40,
    })
    expect(converted.body.usage).toEqual({
      prompt_tokens: 180,
      completion_tokens: 7,
      total_tokens: 187,
      prompt_tokens_details: { cached_tokens: 100, cache_write_tokens: 70 },
    })
  })

  test('without the TTL split, every write is a 5-minute write', () => {
    expect(
      mapAnthropicUsage({ input_tokens: 1, cache_creation_input_tokens: 9, output_tokens: 2 }),
    ).toEqual({ input_tokens: 10, output_tokens: 2, cache_write_tokens: 9 })
    // A cache_creation object without either figure is no split: the total stays.
    expect(
      mapAnthropicUsage({
        input_tokens: 10,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 1000,
        cache_creation: {},
        output_tokens: 5,
      }),
    ).toEqual({
      input_tokens: 1010,
      output_tokens: 5,
      cached_input_tokens: 0,
      cache_write_tokens: 1000,
    })
  })

  test('a TTL split that does not add up to the total loses no write: the rest are 5-minute writes', () => {
    // 40 written, the split names 20: the other 20 are billed at the 5-minute rate.
    expect(
      mapAnthropicUsage({
        input_tokens: 100,
        cache_read_input_tokens: 50,
        cache_creation_input_tokens: 40,
        cache_creation: { ephemeral_5m_input_tokens: 10, ephemeral_1h_input_tokens: 10 },
        output_tokens: 10,
      }),
    ).toEqual({
      input_tokens: 190,
      output_tokens: 10,
      cached_input_tokens: 50,
      cache_write_tokens: 30,
      cache_write_1h_tokens: 10,
    })
    // A split above the total is billed as split: each part was written.
    expect(
      mapAnthropicUsage({
        input_tokens: 1,
        cache_creation_input_tokens: 5,
        cache_creation: { ephemeral_5m_input_tokens: 4, ephemeral_1h_input_tokens: 6 },
        output_tokens: 1,
      }),
    ).toEqual({
      input_tokens: 11,
      output_tokens: 1,
      cache_write_tokens: 4,
      cache_write_1h_tokens: 6,
    })
  })

  test('an answer without cache fields still gets prompt_tokens_details, as zeros', () => {
    const converted = convertAnthropicResponse(
      {
        id: 'msg_2',
        model: 'claude-x',
        content: [{ type: 'text', text: 'hi' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 9, output_tokens: 8 },
      },
      1,
    )
    if (!converted.ok) throw new Error(converted.message)
    expect(converted.body.usage).toEqual({
      prompt_tokens: 9,
      completion_tokens: 8,
      total_tokens: 17,
      prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    })
  })

  test('cache fields reported as 0 still give the translated usage its prompt_tokens_details', () => {
    const converted = convertAnthropicResponse(
      {
        id: 'msg_1',
        model: 'claude-x',
        content: [{ type: 'text', text: 'hi' }],
        stop_reason: 'end_turn',
        usage: {
          input_tokens: 11,
          cache_read_input_tokens: 0,
          cache_creation_input_tokens: 0,
          cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
          output_tokens: 8,
        },
      },
      1,
    )
    if (!converted.ok) throw new Error(converted.message)
    expect(converted.body.usage).toEqual({
      prompt_tokens: 11,
      completion_tokens: 8,
      total_tokens: 19,
      prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    })
  })

  test('cache_control on content parts, system parts and tools is passed on to Anthropic', () => {
    const converted = convertToAnthropicMessages({
      model: 'claude',
      messages: [
        {
          role: 'system',
          content: [{ type: 'text', text: 'long rules', cache_control: { type: 'ephemeral' } }],
        },
        {
          role: 'user',
          content: [{ type: 'text', text: 'doc', cache_control: { type: 'ephemeral', ttl: '1h' } }],
        },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'f', parameters: { type: 'object' } },
          cache_control: { type: 'ephemeral' },
        },
      ],
    })
    if (!converted.ok) throw new Error(converted.message)
    expect(converted.body.system).toEqual([
      { type: 'text', text: 'long rules', cache_control: { type: 'ephemeral' } },
    ])
    expect(converted.body.messages).toEqual([
      {
        role: 'user',
        content: [{ type: 'text', text: 'doc', cache_control: { type: 'ephemeral', ttl: '1h' } }],
      },
    ])
    expect(converted.body.tools).toEqual([
      { name: 'f', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } },
    ])
  })

  test('an OpenAI-compatible upstream is sent the body without cache_control', () => {
    const body = {
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }],
        },
      ],
      tools: [{ type: 'function', function: { name: 'f' }, cache_control: { type: 'ephemeral' } }],
    }
    expect(prepareOpenAIBody(body, { model: 'up' })).toEqual({
      model: 'up',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }],
      tools: [{ type: 'function', function: { name: 'f' } }],
    })
  })

  test('OpenAI usage keeps its cache reads and writes as parts of the prompt', () => {
    expect(
      mapOpenAIUsage({
        prompt_tokens: 1000,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 300 },
      }),
    ).toEqual({
      input_tokens: 1000,
      output_tokens: 5,
      cached_input_tokens: 600,
      cache_write_tokens: 300,
    })
  })
})
