/**
 * The clients' APIs translated into chat completions, at the edges a client reaches with legal
 * requests: an Anthropic server tool (refused: its calls have no price), a tool the client runs
 * (refused for a translated model, counted as its text where the call goes to Anthropic as it
 * came), and a Responses tool result given as content parts.
 */
import { describe, expect, test } from 'bun:test'
import { convertMessagesToChat } from '../../providers/anthropic/convert-messages-to-chat.ts'
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'

describe('Anthropic server tools', () => {
  const params = {
    model: 'm',
    max_tokens: 16,
    messages: [{ role: 'user', content: 'search it' }],
    tools: [
      { name: 'lookup', input_schema: { type: 'object' } },
      { type: 'web_search_20250305', name: 'web_search', max_uses: 2 },
    ],
  }

  test('a server tool is refused naming its type, translated or passed through: its calls have no price', () => {
    for (const lenient of [false, true]) {
      const converted = convertMessagesToChat(params, { lenient })
      expect(converted).toMatchObject({ ok: false, param: 'tools[1].type', outside: false })
      if (converted.ok) return
      expect(converted.message).toContain('web_search_20250305')
      expect(converted.message).toContain('no price')
      expect(converted.message).toContain('send a function tool')
    }
  })

  test('an Anthropic tool the client runs: refused translated, counted as its JSON text passed through', () => {
    const bash = { ...params, tools: [params.tools[0], { type: 'bash_20250124', name: 'bash' }] }
    const translated = convertMessagesToChat(bash)
    expect(translated).toMatchObject({ ok: false, param: 'tools[1].type', outside: true })
    if (!translated.ok) expect(translated.message).toContain('Anthropic offering')
    const converted = convertMessagesToChat(bash, { lenient: true })
    expect(converted.ok).toBe(true)
    if (!converted.ok) return
    const tools = converted.body.tools as { function: { name: string; description?: string } }[]
    expect(tools.map((tool) => tool.function.name)).toEqual(['lookup', 'bash'])
    expect(tools[1]!.function.description).toContain('"bash_20250124"')
  })

  test('a custom tool, typed or not, is a function as before', () => {
    const converted = convertMessagesToChat({
      ...params,
      tools: [{ type: 'custom', name: 'lookup', input_schema: { type: 'object' } }],
    })
    expect(converted.ok).toBe(true)
  })
})

describe('a Responses tool result', () => {
  const withOutput = (output: unknown) => ({
    model: 'm',
    input: [
      { role: 'user', content: 'a' },
      { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c', output },
    ],
  })
  const toolMessage = (output: unknown) => {
    const converted = convertResponsesToChat(withOutput(output))
    if (!converted.ok) return converted
    return (converted.body.messages as { role: string; content: unknown }[]).at(-1)
  }

  test('as text parts: their text, not the parts as JSON', () => {
    expect(
      toolMessage([
        { type: 'input_text', text: 'sunny, ' },
        { type: 'input_text', text: '21 °C' },
      ]),
    ).toEqual({ role: 'tool', tool_call_id: 'c', content: 'sunny, 21 °C' } as never)
    expect(toolMessage('plain')).toMatchObject({ role: 'tool', content: 'plain' })
  })

  test('a part that is not text is refused, naming it', () => {
    expect(toolMessage([{ type: 'input_image', image_url: 'https://x/y.png' }])).toMatchObject({
      ok: false,
      param: 'input[2].output[0]',
    })
  })
})
