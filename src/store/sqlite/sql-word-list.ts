/**
 * A fixed list of the domain's words (src/domain.ts: statuses) as an SQL `IN` list, so a query
 * restates no list of its own. Only for those constants, never a caller's value: each word is
 * checked to be lowercase letters and underscores, which need no quoting beyond '…'.
 */
export function sqlWordList(words: readonly string[]): string {
  for (const word of words) {
    if (!/^[a-z_]+$/.test(word))
      throw new Error(`not a domain word for SQL: ${JSON.stringify(word)}`)
  }
  return `(${words.map((word) => `'${word}'`).join(', ')})`
}
