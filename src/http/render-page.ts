/**
 * One page of a cursor-paginated list, as the native API and the facade's batches list write it:
 * `first_id` and `last_id` are the ids at its ends (null on an empty page), and the next page is
 * asked for `after` last_id. (The facade's files list writes "" on an empty page, as OpenAI's
 * does, so it keeps its own.)
 */
export function renderPage<T>(data: T[], hasMore: boolean, idOf: (item: T) => string) {
  const first = data[0]
  const last = data.at(-1)
  return {
    object: 'list' as const,
    data,
    first_id: first === undefined ? null : idOf(first),
    last_id: last === undefined ? null : idOf(last),
    has_more: hasMore,
  }
}
