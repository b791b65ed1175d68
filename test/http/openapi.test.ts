/**
 * GET /openapi.json documents the routes the gateway serves, from its own route table: it is a
 * valid OpenAPI 3.1 document; every route in it is described by a surface's operation table and
 * every entry of those tables is a route served (none answers unknown_route); operationIds are
 * unique and each names a declared security scheme; and the request schemas are the zod schemas
 * the routes validate with. (The answers are checked against it in openapi-answers.test.ts.)
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import Ajv from 'ajv/dist/2020.js'
import { z } from 'zod'
import { createAccountBody } from '../../src/http/admin.ts'
import { OPERATIONS } from '../../src/http/openapi/build-openapi.ts'
import { submitOptions } from '../../src/http/native-batches.ts'
import { createWebhookBody } from '../../src/schemas/webhooks.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import type { OpenApiDocument } from '../helpers/openapi-check.ts'

let gw: TestGateway
let document: OpenApiDocument
beforeAll(async () => {
  gw = await startTestGateway()
  const response = await fetch(`${gw.url}/openapi.json`)
  expect(response.status).toBe(200)
  document = (await response.json()) as OpenApiDocument
})
afterAll(() => gw.stop())

const operations = () =>
  Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
  )

test('the document is valid OpenAPI 3.1, and each schema in it valid JSON Schema 2020-12', async () => {
  expect(document.openapi).toBe('3.1.0')
  const result = await new Validator().validate(structuredClone(document))
  expect(result.errors ?? []).toEqual([])
  expect(result.valid).toBe(true)
  const ajv = new Ajv({ strict: false })
  for (const [name, schema] of Object.entries(document.components.schemas))
    expect({ name, valid: ajv.validateSchema(schema as object) }).toEqual({ name, valid: true })
})

test('every route served is described, and every description is a route served', async () => {
  const served = operations().map(({ path, method }) => `${method.toUpperCase()} ${path}`)
  const undescribed = served.filter((key) => !(key in OPERATIONS))
  expect(undescribed).toEqual([])
  const unserved = Object.keys(OPERATIONS).filter((key) => !served.includes(key))
  expect(unserved).toEqual([])
  // Every operation answers as a route would (a refusal, a redirect), never unknown_route.
  for (const { path, method } of operations()) {
    const answer = await fetch(`${gw.url}${path.replace(/\{[^}]+\}/g, 'x')}`, {
      method: method.toUpperCase(),
      redirect: 'manual',
    })
    const text = await answer.text()
    expect({ path, method, unknown: text.includes('unknown_route') }).toEqual({
      path,
      method,
      unknown: false,
    })
  }
})

test('operationIds are unique; tags and security schemes are declared; answers are described', () => {
  const ids = operations().map(({ operation }) => operation.operationId)
  expect(new Set(ids).size).toBe(ids.length)
  const tags = new Set((document.tags as { name: string }[]).map((tag) => tag.name))
  const schemes = new Set(Object.keys(document.components.securitySchemes))
  for (const { path, method, operation } of operations()) {
    expect({ path, method, tag: tags.has(operation.tags[0]!) }).toEqual({ path, method, tag: true })
    for (const requirement of operation.security)
      for (const scheme of Object.keys(requirement)) expect(schemes.has(scheme)).toBe(true)
    const statuses = Object.keys(operation.responses).filter((status) => /^[23]/.test(status))
    expect({ path, method, answers: statuses.length > 0 }).toEqual({ path, method, answers: true })
  }
  expect(document.paths['/admin/v1/accounts']!.post!.security).toEqual([{ admin: [] }])
  expect(document.paths['/anthropic/v1/messages']!.post!.security).toEqual([
    { anthropicKey: [] },
    { key: [] },
  ])
})

test("the request schemas are the routes' own zod schemas", () => {
  const input = (schema: z.ZodType) => {
    const { $schema: _, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })
    return rest
  }
  const body = (path: string, method = 'post', media = 'application/json') =>
    document.paths[path]![method]!.requestBody!.content[media]!.schema
  expect(body('/admin/v1/accounts')).toEqual(input(createAccountBody))
  expect(body('/v1/webhooks')).toEqual(input(createWebhookBody))
  // The live bodies and the native file's lines share their components.
  expect(body('/v1/chat/completions')).toEqual({ $ref: '#/components/schemas/ChatRequest' })
  const chat = document.components.schemas.ChatRequest as { properties: Record<string, unknown> }
  expect(Object.keys(chat.properties)).toContain('messages')
  const submit = document.paths['/v1/batches']!.post!
  expect(Object.keys(submit.requestBody!.content)).toEqual([
    'application/jsonl',
    'application/x-ndjson',
    'text/plain',
  ])
  expect(
    (submit.requestBody!.content['application/jsonl'] as Record<string, unknown>)[
      'x-multigrid-line-schema'
    ],
  ).toEqual({ $ref: '#/components/schemas/NativeInputLine' })
  const query = submit.parameters!.filter((parameter) => parameter.in === 'query')
  expect(query.map((parameter) => parameter.name)).toEqual(Object.keys(submitOptions.shape))
  // name's limit is a refinement (it counts code points) yet still published as maxLength
  expect(query.find((parameter) => parameter.name === 'name')!.schema).toMatchObject({
    type: 'string',
    maxLength: 256,
  })
  const results = document.paths['/v1/batches/{id}/results']!.get!.parameters!
  expect(results.map((parameter) => parameter.name)).toEqual(['id', 'filter', 'format'])
  expect(
    document.paths['/openai/v1/files']!.post!.requestBody!.content['multipart/form-data'],
  ).toBeDefined()
})

test("the facade's objects are OpenAI's, and what they add is the documented deviation", async () => {
  const { $defs: openai } = (await Bun.file(
    `${import.meta.dir}/../contracts/openai-batch-files.schema.json`,
  ).json()) as { $defs: Record<string, { properties: object; required: string[] }> }
  const ours = document.components.schemas as Record<
    string,
    { properties: object; required: string[] }
  >
  for (const [theirs, mine, added] of [
    ['Batch', 'OpenAiBatch', ['multigrid']],
    ['OpenAIFile', 'OpenAiFile', []],
    ['ListFilesResponse', 'OpenAiFileList', []],
    ['DeleteFileResponse', 'OpenAiFileDeleted', []],
  ] as const) {
    const their = Object.keys(openai[theirs]!.properties)
    const my = Object.keys(ours[mine]!.properties)
    expect({ mine, missing: their.filter((name) => !my.includes(name)) }).toEqual({
      mine,
      missing: [],
    })
    expect({ mine, added: my.filter((name) => !their.includes(name)) }).toEqual({
      mine,
      added: [...added],
    })
    const required = openai[theirs]!.required.filter((name) => !ours[mine]!.required.includes(name))
    expect({ mine, notRequired: required }).toEqual({ mine, notRequired: [] })
  }
})
