/** Counts per key (lines in flight per batch, unrecorded overruns per account): a key is present while its count is above zero. */
export class Tally {
  private readonly counts = new Map<string, number>()

  get size(): number {
    return this.counts.size
  }

  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
  }

  /** Takes one away; true when that was the key's last. */
  remove(key: string): boolean {
    const left = (this.counts.get(key) ?? 1) - 1
    if (left > 0) {
      this.counts.set(key, left)
      return false
    }
    this.counts.delete(key)
    return true
  }

  count(key: string): number {
    return this.counts.get(key) ?? 0
  }

  has(key: string): boolean {
    return this.counts.has(key)
  }

  keys(): string[] {
    return [...this.counts.keys()]
  }
}
