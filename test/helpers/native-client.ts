/**
 * The native batch API as end-to-end tests call it, for one account's key: submit a JSONL file
 * (201 expected), read a batch, wait until it ends, read its result lines.
 */
import { expect } from 'bun:test'
import type { TestGateway } from './gateway.ts'
import { FINAL_BATCH, waitFor } from './wait.ts'

export interface NativeClient<Batch, Row> {
  /** Submits `file`, `query` such as `?completion_window_hours=72` appended. */
  submit(file: string, query?: string): Promise<Batch>
  read(id: string): Promise<Batch>
  finished(id: string, timeoutMs?: number): Promise<Batch>
  /** The result lines, `query` such as `?filter=succeeded` appended. */
  results(id: string, query?: string): Promise<Row[]>
}

/** `gateway` and `key` are read at each call: suites start their gateway in beforeAll. */
export function nativeClient<Batch extends { status: string }, Row>(
  gateway: () => Pick<TestGateway, 'request'>,
  key: () => string,
): NativeClient<Batch, Row> {
  const request: TestGateway['request'] = (path, k, init) => gateway().request(path, k, init)
  const read = async (id: string) =>
    (await (await request(`/v1/batches/${id}`, key())).json()) as Batch
  return {
    async submit(file, query = '') {
      const response = await request(`/v1/batches${query}`, key(), {
        method: 'POST',
        body: file,
        headers: { 'content-type': 'application/jsonl' },
      })
      expect(response.status).toBe(201)
      return (await response.json()) as Batch
    },
    read,
    finished: (id, timeoutMs = 30_000) =>
      waitFor(
        `batch ${id} to end`,
        async () => {
          const batch = await read(id)
          return FINAL_BATCH.includes(batch.status) ? batch : null
        },
        timeoutMs,
      ),
    async results(id, query = '') {
      const text = await (await request(`/v1/batches/${id}/results${query}`, key())).text()
      return text.trim()
        ? text
            .trim()
            .split('\n')
            .map((line) => JSON.parse(line) as Row)
        : []
    },
  }
}

/** Signs in to the dashboard with `key` and returns the session cookie, as a browser sends it back. */
export async function dashboardCookie(url: string, key: string): Promise<string> {
  const response = await fetch(`${url}/dashboard/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ key }),
    redirect: 'manual',
  })
  expect(response.status).toBe(303)
  return response.headers.get('set-cookie')!.split(';')[0]!
}
