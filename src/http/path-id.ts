/**
 * An id taken from the rest of a path (a wildcard route's `*`), where it may hold a "/" as it is
 * or URL-encoded: decoded, or as it came when it is not valid URL-encoding (`%zz`), so that it is
 * simply not found rather than an error.
 */
export function pathId(rest: string): string {
  try {
    return decodeURIComponent(rest)
  } catch {
    return rest
  }
}
