/**
 * The batches that stopped dispatching here (cancelled, expired or ended, on any instance), and
 * for each batch with lines here the signal its lines wait for a provider's slot under. A batch
 * that stops aborts it, so its lines leave the provider's queue at once, unsent, and end as its
 * pending lines do. Before, such a line waited until a slot came to it and only then saw the
 * cancel: behind an earlier-due batch on a slow pool, a cancelled batch stayed `cancelling`, the
 * line shown `running`, for minutes. A line already upstream is not touched: it finishes, is
 * recorded and billed (its call runs under the dispatcher's own signal, not this one).
 */
export class StoppedBatches {
  private readonly stopped = new Set<string>()
  /** Each batch with lines waiting here: what aborts their wait. */
  private readonly waits = new Map<string, AbortController>()

  /**
   * `shutdown`: the dispatcher's stop, which ends every wait too. One listener for all batches,
   * not a signal combined with it per batch (AbortSignal.any), which it would keep alive.
   */
  constructor(private readonly shutdown: AbortSignal) {
    shutdown.addEventListener(
      'abort',
      () => {
        for (const stop of this.waits.values()) stop.abort(shutdown.reason)
      },
      { once: true },
    )
  }

  has(batchId: string): boolean {
    return this.stopped.has(batchId)
  }

  add(batchId: string): void {
    this.stopped.add(batchId)
    const stop = this.waits.get(batchId)
    if (!stop) return
    this.waits.delete(batchId)
    stop.abort(new Error(`batch ${batchId} stopped`))
  }

  delete(batchId: string): void {
    this.stopped.delete(batchId)
  }

  [Symbol.iterator](): IterableIterator<string> {
    return this.stopped.values()
  }

  /** The signal a line of the batch waits for a slot under: one per batch, not one per line. */
  waitSignal(batchId: string): AbortSignal {
    let stop = this.waits.get(batchId)
    if (!stop) {
      stop = new AbortController()
      if (this.shutdown.aborted) stop.abort(this.shutdown.reason)
      else if (this.stopped.has(batchId)) stop.abort(new Error(`batch ${batchId} stopped`))
      this.waits.set(batchId, stop)
    }
    return stop.signal
  }

  /** The batch has no line here any more: its signal is made again when one comes. */
  settled(batchId: string): void {
    this.waits.delete(batchId)
  }
}
