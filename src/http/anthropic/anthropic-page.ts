/** Anthropic's page of a list (`{data, has_more, first_id, last_id}`), as every list under /anthropic answers. */
export function anthropicPage<T extends { id: string }>(data: T[], hasMore: boolean) {
  return {
    data,
    has_more: hasMore,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
  }
}
