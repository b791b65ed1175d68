/** Polling helpers for end-to-end tests, bounded in time. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | null | undefined | false>,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value) return value
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await Bun.sleep(everyMs)
  }
}

export const FINAL_BATCH = ['completed', 'failed', 'cancelled', 'expired']
