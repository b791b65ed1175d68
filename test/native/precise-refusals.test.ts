/**
 * Refusals that say precisely what was wrong, over real HTTP: a wrong type is named as wrong (not
 * as missing), OpenAI's chat parameters are checked for shape, a caller's value comes back only as
 * a short excerpt, and numbers written as text are plain decimal digits — on the native API, the
 * live endpoint and the dashboard's form alike.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

interface Issue {
  line: number
  custom_id: string | null
  path: string
  message: string
  fix: string
}
interface Refusal {
  error: { code: string; message: string; param: string | null }
  issues?: Issue[]
}

const MB = 1024 * 1024

for (const storeKind of STORES) {
  describe(`precise refusals (${storeKind})`, () => {
    let gw: TestGateway
    let key: string

    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
      ;({ key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 }))
    })
    afterAll(() => gw.stop())

    const submit = (body: string, query = '?dry_run=true') =>
      gw.request(`/v1/batches${query}`, key, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/jsonl' },
      })

    /** The issues of a one-line file whose body has `patch` applied. */
    async function issuesOf(patch: Record<string, unknown>) {
      const response = await submit(jsonl([chatLine('a', 'hello', patch)]))
      expect(response.status).toBe(400)
      return ((await response.json()) as Refusal).issues!
    }

    test('a value of the wrong type is named as wrong, with what to write instead; a missing one "is required"', async () => {
      const cases: [Record<string, unknown>, string, string, string][] = [
        [
          { model: 5 },
          'body.model',
          'must be a string; got a number',
          'write body.model as a string, in quotes: "5"',
        ],
        [
          { messages: 'hello' },
          'body.messages',
          'must be an array; got a string',
          'set body.messages to an array, such as [{"role": "user", "content": "hello"}]',
        ],
        [
          { max_tokens: '32' },
          'body.max_tokens',
          'must be an integer; got a string',
          'write body.max_tokens as a number, without quotes: 32',
        ],
        [
          { n: 1.5 },
          'body.n',
          'must be an integer; got 1.5',
          'set body.n to a whole number, such as 1',
        ],
        [
          { temperature: 'hot' },
          'body.temperature',
          'must be a number; got a string',
          'set body.temperature to a number, such as 0.7',
        ],
        [
          { stream: 'false' },
          'body.stream',
          'must be true or false; got a string',
          'write body.stream as false, without quotes',
        ],
        [
          { stop: 9 },
          'body.stop',
          'must be a string or an array; got a number',
          'set body.stop to a string or an array, such as ["\\n\\n"]',
        ],
        [
          { messages: [{ role: 'user', content: 12 }] },
          'body.messages.0.content',
          'must be a string or an array; got a number',
          'set body.messages.0.content to a string or an array, such as "hello"',
        ],
        [
          { messages: [{ role: 'robot', content: 'x' }] },
          'body.messages.0.role',
          'must be one of "system", "developer", "user", "assistant", "tool"; got "robot"',
          'set body.messages.0.role to "system", "developer", "user", "assistant" or "tool"',
        ],
      ]
      for (const [patch, path, message, fix] of cases) {
        const issues = await issuesOf(patch)
        expect(issues[0]).toEqual({ line: 1, custom_id: 'a', path, message, fix })
      }
      // Absent is still "is required".
      const line = chatLine('a')
      const { max_tokens: _, ...noMessages } = { ...line.body, messages: undefined }
      const response = await submit(jsonl([{ ...line, body: noMessages }]))
      const missing = ((await response.json()) as Refusal).issues!
      expect(missing[0]).toMatchObject({ path: 'body.messages', message: 'is required' })
      expect(missing[0].fix).toContain('add body.messages')
      // The envelope too: a custom_id of the wrong type is not "missing".
      const envelope = await submit(jsonl([{ ...chatLine('x'), custom_id: 7 }]))
      expect(((await envelope.json()) as Refusal).issues![0]).toMatchObject({
        path: 'custom_id',
        message: 'must be a string; got a number',
        fix: 'write custom_id as a string, in quotes: "7"',
      })
    })

    test('the live endpoint words a wrong type the same way', async () => {
      const response = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/chat',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: '32',
        }),
      })
      expect(response.status).toBe(400)
      const body = (await response.json()) as Refusal
      expect(body.error.param).toBe('max_tokens')
      expect(body.error.message).toBe(
        'max_tokens must be an integer; got a string; write max_tokens as a number, without quotes: 32',
      )
    })

    test('the live endpoint tells a body that is not JSON from an empty one', async () => {
      const send = async (body: string) => {
        const response = await gw.request('/v1/chat/completions', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        })
        expect(response.status).toBe(400)
        return ((await response.json()) as Refusal).error.message
      }
      expect(await send('{"model": "sim/chat",}')).toStartWith('the body is not valid JSON;')
      expect(await send('')).toStartWith('the body is empty;')
    })

    test('tool_choice, logit_bias, response_format and tools: bad shapes refused with path and fix, good ones accepted', async () => {
      const bad: [Record<string, unknown>, string, RegExp][] = [
        [
          { tool_choice: 'sometimes' },
          'body.tool_choice',
          /^must be "none", "auto", "required" or an object; got "sometimes"$/,
        ],
        [{ tool_choice: 5 }, 'body.tool_choice', /got 5$/],
        [{ tool_choice: { type: 'function' } }, 'body.tool_choice.function', /^is required$/],
        [
          { tool_choice: { type: 'function', function: { name: 7 } } },
          'body.tool_choice.function.name',
          /^must be a string; got a number$/,
        ],
        [
          { tool_choice: { type: 'tool', name: 'x' } },
          'body.tool_choice.type',
          /^must be one of "function", "custom", "allowed_tools"; got "tool"$/,
        ],
        [{ logit_bias: { hello: 5 } }, 'body.logit_bias.hello', /token id/],
        [{ logit_bias: { '50256': 101 } }, 'body.logit_bias.50256', /^must be at most 100$/],
        [{ logit_bias: { '50256': -101 } }, 'body.logit_bias.50256', /^must be at least -100$/],
        [
          { logit_bias: { '50256': 0.5 } },
          'body.logit_bias.50256',
          /^must be an integer; got 0.5$/,
        ],
        [{ logit_bias: [1, 2] }, 'body.logit_bias', /^must be an object; got an array$/],
        [
          { response_format: { type: 'json_schema' } },
          'body.response_format.json_schema',
          /^is required$/,
        ],
        [
          { response_format: { type: 'json_schema', json_schema: { name: 'answer' } } },
          'body.response_format.json_schema.schema',
          /^is required$/,
        ],
        [
          {
            response_format: {
              type: 'json_schema',
              json_schema: { name: 'answer', schema: 'object' },
            },
          },
          'body.response_format.json_schema.schema',
          /^must be an object; got a string$/,
        ],
        [
          { response_format: { type: 'json_schema', json_schema: { schema: { type: 'object' } } } },
          'body.response_format.json_schema.name',
          /^is required$/,
        ],
        [
          {
            response_format: {
              type: 'json_schema',
              json_schema: { name: 'my answer', schema: {} },
            },
          },
          'body.response_format.json_schema.name',
          /letters, digits, underscores or dashes/,
        ],
        [{ response_format: { type: 'yaml' } }, 'body.response_format.type', /got "yaml"$/],
        [
          { tools: [{ type: 'retrieval' }] },
          'body.tools.0.type',
          /^must be one of "function", "custom"; got "retrieval"$/,
        ],
        [{ tools: [{ function: { name: 'f' } }] }, 'body.tools.0.type', /^is required$/],
        [{ tools: [{ type: 'function' }] }, 'body.tools.0.function', /^is required$/],
        [
          { tools: [{ type: 'function', function: { description: 'no name' } }] },
          'body.tools.0.function.name',
          /^is required$/,
        ],
        [
          { tools: [{ type: 'function', function: { name: 'f', parameters: 'none' } }] },
          'body.tools.0.function.parameters',
          /^must be an object; got a string$/,
        ],
      ]
      const failures: string[] = []
      for (const [patch, path, message] of bad) {
        const issues = await issuesOf(patch)
        const issue = issues[0]
        // The fix names the field (for a bad key, the object that holds it).
        const named = path.split('.').slice(0, 2).join('.')
        if (issue.path !== path || !message.test(issue.message) || !issue.fix.includes(named)) {
          failures.push(`${JSON.stringify(patch)}: ${JSON.stringify(issue)}`)
        }
      }
      expect(failures).toEqual([])

      const good: Record<string, unknown>[] = [
        { tool_choice: 'none' },
        { tool_choice: 'auto' },
        { tool_choice: 'required' },
        { tool_choice: { type: 'function', function: { name: 'get_weather' } } },
        {
          tool_choice: {
            type: 'allowed_tools',
            allowed_tools: {
              mode: 'auto',
              tools: [{ type: 'function', function: { name: 'get_weather' } }],
            },
          },
        },
        { logit_bias: { '50256': -100, '1': 100, '220': 0 } },
        { logit_bias: null },
        { response_format: { type: 'text' } },
        { response_format: { type: 'json_object' } },
        {
          response_format: {
            type: 'json_schema',
            json_schema: { name: 'answer-1', schema: { type: 'object' }, strict: true },
          },
        },
        {
          tools: [
            {
              type: 'function',
              function: {
                name: 'get_weather',
                description: 'w',
                parameters: { type: 'object' },
                strict: null,
              },
            },
          ],
        },
        { tools: [{ type: 'custom', custom: { name: 'sql', format: { type: 'text' } } }] },
        // Parameters the gateway does not know still pass, as before.
        {
          parallel_tool_calls: false,
          metadata: { team: 'x' },
          some_future_parameter: [1, { a: 2 }],
        },
      ]
      for (const patch of good) {
        const response = await submit(jsonl([chatLine('a', 'hello', patch)]))
        if (response.status !== 200)
          failures.push(`${JSON.stringify(patch)}: ${response.status} ${await response.text()}`)
      }
      expect(failures).toEqual([])
    })

    test('a 1 MB custom_id, model name or field name comes back as a short excerpt', async () => {
      const longId = 'i'.repeat(MB)
      const duplicate = await submit(jsonl([chatLine(longId), chatLine(longId)]))
      const duplicateText = await duplicate.text()
      expect(duplicate.status).toBe(400)
      expect(duplicateText.length).toBeLessThan(4096)
      const issues = (JSON.parse(duplicateText) as Refusal).issues!
      expect(issues.map((i) => [i.line, i.path])).toEqual([
        [1, 'custom_id'],
        [2, 'custom_id'],
        [2, 'custom_id'],
      ])
      expect(issues[2].message).toBe(
        `"${'i'.repeat(64)}… (${MB} characters)" is already used on line 1`,
      )
      expect(issues[0].custom_id).toBe(`${'i'.repeat(128)}… (${MB} characters)`)

      const model = await submit(jsonl([chatLine('a', 'hello', {}, `m${'o'.repeat(MB)}`)]))
      const modelText = await model.text()
      expect(model.status).toBe(400)
      expect(modelText.length).toBeLessThan(4096)
      expect((JSON.parse(modelText) as Refusal).issues![0].message).toBe(
        `names an unknown model, "m${'o'.repeat(63)}… (${MB + 1} characters)"`,
      )

      const field = await submit(jsonl([{ ...chatLine('a'), ['k'.repeat(MB)]: 1 }]))
      const fieldText = await field.text()
      expect(field.status).toBe(400)
      expect(fieldText.length).toBeLessThan(4096)
      expect((JSON.parse(fieldText) as Refusal).issues![0].message).toContain(
        `unknown field ${'k'.repeat(64)}…`,
      )

      const bias = await submit(
        jsonl([chatLine('a', 'hello', { logit_bias: { ['b'.repeat(MB)]: 1 } })]),
      )
      const biasText = await bias.text()
      expect(bias.status).toBe(400)
      expect(biasText.length).toBeLessThan(4096)

      const live = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'x'.repeat(100_000),
          messages: [{ role: 'user', content: 'hi' }],
        }),
      })
      const liveText = await live.text()
      // Unknown: OpenAI's 404 model_not_found.
      expect(live.status).toBe(404)
      expect(liveText.length).toBeLessThan(1024)
    })

    test('a url without its /v1, or as a full address, is refused with the one url it stands for', async () => {
      const fixFor = async (url: string) => {
        const response = await submit(jsonl([{ ...chatLine('a'), url }]))
        expect(response.status).toBe(400)
        const issue = ((await response.json()) as Refusal).issues![0]
        expect(issue).toMatchObject({ line: 1, custom_id: 'a', path: 'url' })
        expect(issue.message).toContain(`got ${JSON.stringify(url)}`)
        return issue.fix
      }
      expect(await fixFor('/chat/completions')).toBe('set url to "/v1/chat/completions"')
      expect(await fixFor('https://api.openai.com/v1/chat/completions')).toBe(
        'set url to "/v1/chat/completions"',
      )
      expect(await fixFor('/v1/chat/completions/')).toBe('set url to "/v1/chat/completions"')
      // A path that stands for none of them gets the whole list.
      expect(await fixFor('/v1/completions')).toBe(
        'set url to "/v1/chat/completions", "/v1/embeddings" or "/v1/responses"',
      )
    })

    test('ids in paths and header values come back as a short excerpt', async () => {
      const id = `batch_${'z'.repeat(6000)}`
      for (const [method, path] of [
        ['GET', `/v1/batches/${id}`],
        ['DELETE', `/v1/batches/${id}`],
        ['GET', `/v1/batches/${id}/results`],
        ['GET', `/openai/v1/batches/${id}`],
        ['POST', `/openai/v1/batches/${id}/cancel`],
        ['GET', `/openai/v1/files/${id}`],
        ['GET', `/no/such/route/${id}`],
      ] as const) {
        const response = await gw.request(path, key, { method })
        const text = await response.text()
        expect([path.slice(0, 30), response.status]).toEqual([path.slice(0, 30), 404])
        expect(text.length).toBeLessThan(512)
        expect(text).toContain(`${'z'.repeat(20)}… (`)
      }
      const type = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl([chatLine('a')]),
        headers: { 'content-type': `application/${'x'.repeat(6000)}` },
      })
      expect(type.status).toBe(415)
      expect((await type.text()).length).toBeLessThan(512)
    })

    test('completion_window_hours and limit take plain decimal digits only', async () => {
      const file = jsonl([chatLine('a')])
      for (const hours of ['0x10', '1e2', ' 24', '24 ', '+24', '024', '24.0', '0b11', '', '0']) {
        const response = await submit(
          file,
          `?dry_run=true&completion_window_hours=${encodeURIComponent(hours)}`,
        )
        expect([hours, response.status]).toEqual([hours, 400])
        const body = (await response.json()) as Refusal
        expect(body.error.param).toBe('completion_window_hours')
        expect(body.error.message).toBe(
          `query parameter completion_window_hours must be a whole number from 1 to 168 in decimal digits; got ${JSON.stringify(hours)}; set completion_window_hours to a whole number from 1 to 168 in decimal digits, such as 24`,
        )
      }
      for (const hours of ['1', '24', '168']) {
        expect((await submit(file, `?dry_run=true&completion_window_hours=${hours}`)).status).toBe(
          200,
        )
      }
      for (const path of ['/v1/batches', '/openai/v1/batches', '/openai/v1/files']) {
        for (const limit of ['0x10', '1e1', ' 5', '5.0']) {
          const response = await gw.request(`${path}?limit=${encodeURIComponent(limit)}`, key)
          expect([path, limit, response.status]).toEqual([path, limit, 400])
          expect(((await response.json()) as Refusal).error.message).toContain(
            `got ${JSON.stringify(limit)}`,
          )
        }
        expect((await gw.request(`${path}?limit=5`, key)).status).toBe(200)
      }
    })

    test("the dashboard's form is held to the API's rule for the window, and shows the API's refusal", async () => {
      const signIn = await fetch(`${gw.url}/dashboard/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ key }),
        redirect: 'manual',
      })
      expect(signIn.status).toBe(303)
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]
      const post = (fields: Record<string, string>) => {
        const form = new FormData()
        form.set('file', new Blob([jsonl([chatLine('a')])]), 'a.jsonl')
        for (const [name, value] of Object.entries(fields)) form.set(name, value)
        return fetch(`${gw.url}/dashboard/batches`, {
          method: 'POST',
          headers: { cookie },
          body: form,
          redirect: 'manual',
        })
      }
      const unescape = (html: string) =>
        html
          .replace(/&quot;/g, '"')
          .replace(/&#39;/g, "'")
          .replace(/&lt;/g, '<')
          .replace(/&gt;/g, '>')
          .replace(/&amp;/g, '&')
      for (const hours of ['0x10', '1e2', ' 24', '169']) {
        const page = await post({ completion_window_hours: hours, dry_run: 'true' })
        expect([hours, page.status]).toEqual([hours, 400])
        const api = await submit(
          jsonl([chatLine('a')]),
          `?dry_run=true&completion_window_hours=${encodeURIComponent(hours)}`,
        )
        expect(api.status).toBe(400)
        const apiMessage = ((await api.json()) as Refusal).error.message.replace(
          /^query parameter /,
          '',
        )
        expect(unescape(await page.text())).toContain(apiMessage)
      }
      const name = await post({ name: 'a\u0000b', dry_run: 'true' })
      expect(name.status).toBe(400)
      expect(unescape(await name.text())).toContain(
        'name must be Unicode text without NUL characters',
      )
      const quote = await post({ completion_window_hours: '48', dry_run: 'true' })
      expect(quote.status).toBe(200)
      expect(await quote.text()).toContain('Quote: 1 lines')
    })
  })
}
