/** What the document says of one route: the shape each surface's table (…-operations.ts) fills in. */
import type { z } from 'zod'
import type { AnswerName, RequestName } from './components.ts'

type SchemaName = AnswerName | RequestName

/** Who may call: a user key (Bearer), the admin token, … (build-openapi.ts SECURITY_SCHEMES). */
export type Security = 'key' | 'anthropicKey' | 'admin' | 'metrics' | 'session' | 'none'

/** A request body: JSON by a zod schema, a JSONL file of named lines, a form, or none. */
export type Body =
  | { json: z.ZodType; required?: boolean; description?: string }
  | { jsonl: 'NativeInputLine'; description: string }
  | { multipart: Record<string, unknown>; description?: string }
  | { form: Record<string, unknown>; description?: string }

/** One answer: JSON by a component's name, JSONL lines of one, an event stream, HTML or text. */
export type Answer = AnswerBody & {
  /** Headers of its own, each with what it says (the rate-limit headers are added for keys). */
  headers?: Record<string, string>
}

type AnswerBody =
  | {
      description: string
      json: SchemaName | SchemaName[]
      /** With `stream: true` in the body, server-sent events instead. */
      streams?: true
    }
  | { description: string; jsonl: SchemaName | SchemaName[]; media?: string }
  | {
      description: string
      media: 'text/event-stream' | 'text/html' | 'text/plain' | 'application/javascript'
    }
  | { description: string }

export interface Operation {
  /** The operationId: a verb and a noun, unique in the document. */
  id: string
  summary: string
  /** The docs/ page that says more. */
  docs?: string
  security: Security
  query?: z.ZodObject
  /** Request headers the route reads (Idempotency-Key, …), each with what it does. */
  headers?: Record<string, string>
  body?: Body
  /** By status. Refusals are the surface's error envelope and need not be listed. */
  answers: Record<number, Answer>
}

/** Each table is keyed by "METHOD /path/{param}", as the route table names its routes. */
export type Operations = Record<string, Operation>
