/**
 * GET /openapi.json documents the routes the gateway serves, from its own route table: every
 * documented operation is a real route (none answers unknown_route), the surfaces of docs/openai-facade.md
 * are in it, and the live bodies carry their zod-made JSON Schemas.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway()
})
afterAll(() => gw.stop())

interface Document {
  openapi: string
  paths: Record<
    string,
    Record<
      string,
      {
        tags: string[]
        requestBody?: {
          content: Record<string, { schema: { properties?: Record<string, unknown> } }>
        }
      }
    >
  >
}

test('the document lists the surfaces, each operation a real route', async () => {
  const response = await fetch(`${gw.url}/openapi.json`)
  expect(response.status).toBe(200)
  const document = (await response.json()) as Document
  expect(document.openapi).toBe('3.1.0')
  for (const [path, method] of [
    ['/v1/batches', 'post'],
    ['/v1/responses', 'post'],
    ['/openai/v1/responses', 'post'],
    ['/openai/v1/batches/{id}/cancel', 'post'],
    ['/anthropic/v1/messages', 'post'],
    ['/anthropic/v1/messages/count_tokens', 'post'],
    ['/anthropic/v1/messages/batches/{id}/results', 'get'],
    ['/anthropic/v1/messages/batches/{id}', 'delete'],
    ['/admin/v1/accounts', 'post'],
  ])
    expect(document.paths[path]?.[method]).toBeDefined()
  const chat = document.paths['/v1/chat/completions'].post.requestBody!
  expect(Object.keys(chat.content['application/json'].schema.properties!)).toContain('messages')
  // Every operation answers as a route would (a refusal, a redirect), never unknown_route.
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const method of Object.keys(operations)) {
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
  }
})
