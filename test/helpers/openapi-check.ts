/**
 * Checks an answer against the schema the gateway's own OpenAPI document gives for it: the
 * document is loaded into Ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect) and each schema is
 * reached by its JSON pointer, so its `$ref`s resolve inside the document as a client's would.
 */
import Ajv from 'ajv/dist/2020.js'

export interface OpenApiDocument {
  openapi: string
  paths: Record<string, Record<string, OperationObject>>
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> }
  [field: string]: unknown
}

export interface OperationObject {
  operationId: string
  tags: string[]
  summary: string
  security: Record<string, string[]>[]
  parameters?: { name: string; in: string; required: boolean; schema: unknown }[]
  requestBody?: { content: Record<string, { schema: unknown }> }
  responses: Record<
    string,
    {
      content?: Record<string, { schema: unknown; 'x-multigrid-line-schema'?: unknown }>
      headers?: Record<string, unknown>
    }
  >
}

/** JSON pointer tokens as a URI fragment: `~` and `/` escaped, then percent-encoded. */
const pointer = (tokens: string[]) =>
  tokens
    .map((token) => encodeURIComponent(token.replace(/~/g, '~0').replace(/\//g, '~1')))
    .join('/')

export function openApiChecker(document: OpenApiDocument) {
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
  ajv.addSchema({ ...document, $id: 'openapi' })

  /**
   * The problems (none when valid) of `value` as the answer `status` of `METHOD path` in `media`;
   * `line: true` checks it as one line of a JSONL answer (`x-multigrid-line-schema`).
   */
  function problems(
    operation: string,
    status: number | 'default',
    value: unknown,
    options: { media?: string; line?: boolean } = {},
  ): string[] {
    const [method, path] = operation.split(' ') as [string, string]
    const media = options.media ?? (options.line ? 'application/jsonl' : 'application/json')
    const where = [
      'paths',
      path,
      method.toLowerCase(),
      'responses',
      String(status),
      'content',
      media,
      options.line ? 'x-multigrid-line-schema' : 'schema',
    ]
    const content =
      document.paths[path]?.[method.toLowerCase()]?.responses[String(status)]?.content?.[media]
    if (!content) return [`the document has no ${media} answer ${status} for ${operation}`]
    const validate = ajv.getSchema(`openapi#/${pointer(where)}`)
    if (!validate) return [`no schema at ${where.join(' ')}`]
    if (validate(value)) return []
    return (validate.errors ?? []).map(
      (error) =>
        `${operation} ${status}: ${error.instancePath || '/'} ${error.message} ${JSON.stringify(error.params)}`,
    )
  }

  /** A refusal against the document's answer for its status, or `default` when it has none. */
  function refusalProblems(operation: string, status: number, value: unknown): string[] {
    const [method, path] = operation.split(' ') as [string, string]
    const listed = document.paths[path]?.[method.toLowerCase()]?.responses[String(status)]
    return problems(operation, listed ? status : 'default', value)
  }

  /** Each line of a JSONL answer against its line schema. */
  function lineProblems(operation: string, status: number, text: string, media?: string) {
    return text
      .split('\n')
      .filter((line) => line !== '')
      .flatMap((line) => problems(operation, status, JSON.parse(line), { line: true, media }))
  }

  /** The problems of `value` against `#/components/schemas/<name>` (an event's data, say). */
  function componentProblems(name: string, value: unknown): string[] {
    const validate = ajv.getSchema(`openapi#/components/schemas/${name}`)
    if (!validate) return [`no component ${name}`]
    if (validate(value)) return []
    return (validate.errors ?? []).map(
      (error) => `${name}: ${error.instancePath || '/'} ${error.message}`,
    )
  }

  /** The problems of a request body against the operation's request schema in `media`. */
  function requestProblems(operation: string, body: unknown, media = 'application/json') {
    const [method, path] = operation.split(' ') as [string, string]
    const where = ['paths', path, method.toLowerCase(), 'requestBody', 'content', media, 'schema']
    if (!document.paths[path]?.[method.toLowerCase()]?.requestBody?.content[media])
      return [`the document has no ${media} request body for ${operation}`]
    const validate = ajv.getSchema(`openapi#/${pointer(where)}`)
    if (!validate) return [`no schema at ${where.join(' ')}`]
    if (validate(body)) return []
    return (validate.errors ?? []).map(
      (error) => `${operation} request: ${error.instancePath || '/'} ${error.message}`,
    )
  }

  /** The headers the document names for the answer that the real answer lacks. */
  function missingHeaders(operation: string, status: number, headers: Headers): string[] {
    const [method, path] = operation.split(' ') as [string, string]
    const answer = document.paths[path]?.[method.toLowerCase()]?.responses[String(status)]
    return Object.keys(answer?.headers ?? {}).filter((name) => !headers.has(name))
  }

  return {
    problems,
    refusalProblems,
    lineProblems,
    componentProblems,
    requestProblems,
    missingHeaders,
  }
}
