/**
 * The route pattern a request path matched (`/v1/batches/:id` for `/v1/batches/b_1`), found in
 * the app's route table by the logger after the answer, instead of by a global hook on every
 * route: a global hook makes Elysia run hook code in every handler, logged or not.
 *
 * Matched by memoirist, the router Elysia itself routes with, so the pattern is the one Elysia
 * chose: a static segment before `:param` before `*`. Built once, from the routes as they are at
 * the first lookup.
 */
import { Memoirist } from 'memoirist'

export interface RouteEntry {
  method: string
  path: string
}

export type RouteMatcher = (method: string, path: string) => string | null

export function routeMatcher(routes: () => readonly RouteEntry[]): RouteMatcher {
  let router: Memoirist<string> | null = null
  return (method, path) => {
    router ??= routerOf(routes())
    const loose = loosePath(path)
    const found =
      router.find(method, loose) ??
      (method === 'HEAD' ? router.find('GET', loose) : null) ??
      router.find('ALL', loose)
    return found?.store ?? null
  }
}

/** A trailing slash matches the route without it, as Elysia's router does (strictPath off). */
const loosePath = (path: string) =>
  path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path

function routerOf(routes: readonly RouteEntry[]): Memoirist<string> {
  const router = new Memoirist<string>()
  for (const { method, path } of routes) router.add(method, path, path)
  return router
}

/**
 * The methods a path has routes for, in the table's order (GET, POST, …): for a 405's Allow
 * header when a request's method has none. HEAD goes with GET, as Elysia serves it.
 */
export function pathMethods(routes: () => readonly RouteEntry[]): (path: string) => string[] {
  let table: { methods: string[]; router: Memoirist<string> } | null = null
  return (path) => {
    if (!table) {
      const all = routes()
      table = { methods: [...new Set(all.map((route) => route.method))], router: routerOf(all) }
    }
    const { methods, router } = table
    const loose = loosePath(path)
    const found = methods.filter(
      (method) => method !== 'ALL' && router.find(method, loose) !== null,
    )
    return found.includes('GET') && !found.includes('HEAD') ? [...found, 'HEAD'] : found
  }
}
