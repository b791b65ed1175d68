/**
 * Loading and unloading a fine-tune (a LoRA adapter) on one replica, as vLLM does with runtime
 * LoRA updating
 * (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): `POST {base_url}/load_lora_adapter`
 * {"lora_name", "lora_path"} and `POST {base_url}/unload_lora_adapter` {"lora_name"}.
 */
import {
  classifyException,
  classifyStatus,
  isConnectFailure,
  upstreamError,
} from '../classify-error.ts'
import { createDeadline } from '../deadline.ts'
import type { FineTuneCalls } from '../fine-tune-residency.ts'
import type { Replica } from '../pool.ts'

// vLLM answers a load of a fine-tune it holds already with a 400 that says so: it is loaded.
const ALREADY_LOADED = /already been loaded|already loaded/i

export function createFineTuneCalls(options: {
  headers: Record<string, string>
  timeoutMs: number
  apiKey: string | null
}): FineTuneCalls {
  /** One control call to a replica within the timeout: its answer read whole, or what failed. */
  async function call(
    replica: Replica,
    request: { method: 'GET' | 'POST'; path: string; body?: unknown },
  ) {
    const deadline = createDeadline(options.timeoutMs)
    const json = request.body === undefined ? undefined : JSON.stringify(request.body)
    try {
      const response = await replica.client.request({
        method: request.method,
        path: request.path,
        headers: json
          ? { 'content-type': 'application/json', ...options.headers }
          : options.headers,
        body: json,
        signal: deadline,
        control: true,
      })
      return {
        ok: true as const,
        status: response.status,
        header: (name: string) => response.header(name),
        text: await response.text(),
      }
    } catch (cause) {
      return {
        ok: false as const,
        cause,
        error: classifyException(cause, deadline, options.apiKey),
      }
    } finally {
      deadline.done()
    }
  }

  const post = (replica: Replica, path: string, body: unknown) =>
    call(replica, { method: 'POST', path, body })

  return {
    async load(replica, fineTune) {
      const answer = await post(replica, '/load_lora_adapter', {
        lora_name: fineTune.name,
        lora_path: fineTune.path,
      })
      if (!answer.ok) {
        const health = isConnectFailure(answer.cause) ? 'down' : 'failure'
        return { ok: false, error: answer.error, health }
      }
      if (answer.status < 300 || (answer.status === 400 && ALREADY_LOADED.test(answer.text))) {
        return { ok: true }
      }
      const refused = classifyStatus(answer.status, answer.header, answer.text, options.apiKey)
      // Retried, even a 4xx: a replica full of another instance's fine-tunes refuses a load that
      // a later try may get in. A source that cannot be loaded fails once its tries are spent.
      const message = `replica ${replica.baseUrl} could not load fine-tune ${fineTune.name}: ${refused.message}`
      const error = upstreamError('server_error', message, {
        status: refused.status,
        retryAfterMs: refused.retryAfterMs,
        body: refused.body,
      })
      return { ok: false, error, health: answer.status >= 500 ? 'failure' : 'ok' }
    },
    async unload(replica, name) {
      // A fine-tune the replica does not hold (it restarted) is as good as unloaded.
      await post(replica, '/unload_lora_adapter', { lora_name: name })
    },
    async held(replica) {
      // vLLM lists each fine-tune it holds as a model of its own, its base model as `parent`.
      const answer = await call(replica, { method: 'GET', path: '/models' })
      if (!answer.ok || answer.status !== 200) return null
      try {
        const listed = JSON.parse(answer.text) as { data?: { id?: unknown; parent?: unknown }[] }
        return (listed.data ?? [])
          .filter((model) => typeof model.id === 'string' && typeof model.parent === 'string')
          .map((model) => model.id as string)
      } catch {
        return null
      }
    },
  }
}
