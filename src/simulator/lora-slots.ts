/**
 * Fine-tunes (LoRA adapters) loaded at runtime on a simulated vLLM replica (vLLM with
 * --enable-lora, --max-loras and
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): POST /v1/load_lora_adapter and /v1/unload_lora_adapter,
 * at most maxLoras held at once (a load past that is refused, not queued), all lost on restart.
 * Counts what a test asks about: loads and unloads per fine-tune, the most held at once, and the
 * answers served per fine-tune.
 */
export interface LoraStats {
  /** Held now, in the order they were loaded. */
  loaded: string[]
  loads: Record<string, number>
  unloads: Record<string, number>
  /** Answers served per fine-tune. */
  served: Record<string, number>
  /** The most fine-tunes held at once (loads under way included). */
  maxLoaded: number
  /** Loads refused because maxLoras were held. */
  refusedFull: number
  /** Inference requests for a model this replica did not hold (answered 404). */
  missing: number
}

const bump = (counts: Record<string, number>, name: string) => {
  counts[name] = (counts[name] ?? 0) + 1
}

export class LoraSlots {
  /** Fine-tune name → its path; a load under way holds its place already. */
  private readonly held = new Map<string, string>()
  private stats: Omit<LoraStats, 'loaded'> = LoraSlots.empty()
  /** Raised by a restart: a load that was under way then did not happen. */
  private generation = 0

  private static empty() {
    return { loads: {}, unloads: {}, served: {}, maxLoaded: 0, refusedFull: 0, missing: 0 }
  }

  has(name: string): boolean {
    return this.held.has(name)
  }

  entries(): [string, string][] {
    return [...this.held.entries()]
  }

  served(name: string) {
    bump(this.stats.served, name)
  }

  missing() {
    this.stats.missing++
  }

  /** A restart: every fine-tune is gone. */
  clear() {
    this.held.clear()
    this.generation++
  }

  async load(body: unknown, maxLoras: number, loadMs: number): Promise<Response> {
    const { lora_name: name, lora_path: path } = (body ?? {}) as Record<string, unknown>
    if (typeof name !== 'string' || typeof path !== 'string' || !name || !path) {
      return invalid(400, "'lora_name' and 'lora_path' must both be provided.")
    }
    if (this.held.has(name)) {
      return invalid(400, `The lora adapter '${name}' has already been loaded.`)
    }
    if (this.held.size >= maxLoras) {
      this.stats.refusedFull++
      return invalid(
        400,
        `Cannot load LoRA adapter '${name}': ${maxLoras} adapters (max_loras) are loaded already; unload one first.`,
      )
    }
    this.held.set(name, path)
    this.stats.maxLoaded = Math.max(this.stats.maxLoaded, this.held.size)
    const generation = this.generation
    if (loadMs > 0) await Bun.sleep(loadMs)
    if (generation !== this.generation) return invalid(500, 'the server restarted')
    bump(this.stats.loads, name)
    return new Response(`Success: LoRA adapter '${name}' added successfully.`)
  }

  unload(body: unknown): Response {
    const { lora_name: name } = (body ?? {}) as Record<string, unknown>
    if (typeof name !== 'string' || !this.held.has(name)) {
      return invalid(404, `The lora adapter '${String(name)}' cannot be found.`)
    }
    this.held.delete(name)
    bump(this.stats.unloads, name)
    return new Response(`Success: LoRA adapter '${name}' removed successfully.`)
  }

  snapshot(): LoraStats {
    return { loaded: [...this.held.keys()], ...structuredClone(this.stats) }
  }

  resetStats() {
    this.stats = LoraSlots.empty()
  }
}

/** vLLM's error body: its exception name as the type, the status as the code. */
export function invalid(status: number, message: string): Response {
  const type = status === 404 ? 'NotFoundError' : 'BadRequestError'
  return new Response(JSON.stringify({ error: { message, type, param: null, code: status } }), {
    status,
    headers: { 'content-type': 'application/json' },
  })
}

/** vLLM's answer for a model it does not serve. */
export const modelMissing = (model: string) =>
  invalid(404, `The model \`${model}\` does not exist.`)
