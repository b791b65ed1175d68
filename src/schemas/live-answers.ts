/**
 * The live endpoints' answers (docs/live.md, docs/clients/responses.md): the upstream's own
 * objects, passed on or translated, so only the fields every client reads are held here; the
 * rest pass as they came.
 */
import { z } from 'zod'

const usage = z.looseObject({}).describe("the provider's token counts")

export const chatCompletionSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('chat.completion'),
    model: z.string(),
    choices: z.array(z.looseObject({ index: z.int(), message: z.looseObject({}) })),
    usage: usage.optional(),
  })
  .describe("OpenAI's chat completion object.")

export const embeddingsAnswerSchema = z
  .looseObject({
    object: z.literal('list'),
    data: z.array(z.looseObject({ object: z.literal('embedding'), index: z.int() })),
    model: z.string(),
    usage: usage.optional(),
  })
  .describe("OpenAI's embeddings list.")

export const responseObjectSchema = z
  .looseObject({
    id: z.string(),
    object: z.literal('response'),
    status: z.string(),
    model: z.string(),
    output: z.array(z.looseObject({ type: z.string() })),
    usage: usage.nullable().optional(),
  })
  .describe("OpenAI's Response object (docs/clients/responses.md).")
