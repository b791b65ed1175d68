/**
 * The route pattern a logged request is given (route-matcher.ts), from a table shaped like the
 * app's: static segments before parameters before a trailing wildcard, by method.
 */
import { expect, test } from 'bun:test'
import { pathMethods, routeMatcher } from '../../src/http/route-matcher.ts'

const routes = [
  { method: 'GET', path: '/v1/batches' },
  { method: 'POST', path: '/v1/batches' },
  { method: 'GET', path: '/v1/batches/:id' },
  { method: 'GET', path: '/v1/batches/:id/results' },
  { method: 'POST', path: '/v1/batches/:id/cancel' },
  { method: 'GET', path: '/v1/batches/estimate' },
  { method: 'GET', path: '/dashboard/*' },
  { method: 'ALL', path: '/v1/anything/:x' },
  { method: 'GET', path: '/' },
]

test('a path is given the pattern of the route it matched, by method', () => {
  let built = 0
  const routeOf = routeMatcher(() => (built++, routes))
  expect(routeOf('GET', '/v1/batches')).toBe('/v1/batches')
  expect(routeOf('POST', '/v1/batches')).toBe('/v1/batches')
  expect(routeOf('GET', '/v1/batches/b_1')).toBe('/v1/batches/:id')
  expect(routeOf('GET', '/v1/batches/b_1/results')).toBe('/v1/batches/:id/results')
  expect(routeOf('POST', '/v1/batches/b_1/cancel')).toBe('/v1/batches/:id/cancel')
  // A static segment wins over a parameter in the same place.
  expect(routeOf('GET', '/v1/batches/estimate')).toBe('/v1/batches/estimate')
  // A trailing slash matches the route without it; HEAD is served by GET; ALL takes any method.
  expect(routeOf('GET', '/v1/batches/b_1/')).toBe('/v1/batches/:id')
  expect(routeOf('HEAD', '/v1/batches/b_1')).toBe('/v1/batches/:id')
  expect(routeOf('DELETE', '/v1/anything/1')).toBe('/v1/anything/:x')
  expect(routeOf('GET', '/dashboard/assets/app.js')).toBe('/dashboard/*')
  expect(routeOf('GET', '/')).toBe('/')
  expect(built).toBe(1)
})

test('no route, a wrong method or an empty parameter is null', () => {
  const routeOf = routeMatcher(() => routes)
  expect(routeOf('GET', '/v2/batches')).toBeNull()
  expect(routeOf('DELETE', '/v1/batches/b_1')).toBeNull()
  expect(routeOf('GET', '/v1/batches/b_1/results/more')).toBeNull()
  expect(routeOf('POST', '/v1/batches//cancel')).toBeNull()
})

test('the methods a path takes, for a 405: each method with a route matching it', () => {
  const methodsOf = pathMethods(() => routes)
  // HEAD is served wherever GET is.
  expect(methodsOf('/v1/batches')).toEqual(['GET', 'POST', 'HEAD'])
  expect(methodsOf('/v1/batches/b_1/')).toEqual(['GET', 'HEAD'])
  expect(methodsOf('/v1/batches/b_1/cancel')).toEqual(['POST'])
  expect(methodsOf('/v1/elsewhere')).toEqual([])
})
