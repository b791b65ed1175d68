/**
 * Streams a multipart upload (`purpose` field + `file` part) with busboy: the file part goes
 * straight to the sink as it arrives, never held whole in memory.
 *
 * However the upload ends — whole, malformed, cut short by the client, refused by the sink — this
 * returns or throws only once the sink has settled, so the caller can delete what the sink wrote
 * without racing it. A malformed or broken body fails the file stream the sink is reading, so the
 * sink stops there instead of waiting for bytes that never come.
 */
import busboy from 'busboy'
import { Readable } from 'node:stream'
import { badRequest } from '../../errors.ts'
import { BodyAborted, tooLarge, type BodyLimit } from '../../ingest/read-body.ts'

/**
 * `limit` bounds the whole body as it arrives, whatever its parts: a chunked body declares no
 * size, and the sink counts only the file part's bytes (a body of other parts, or of no part
 * busboy recognises, would otherwise be read to its end).
 */
export async function readMultipartUpload<T>(
  request: Request,
  limit: BodyLimit,
  sink: (
    file: AsyncIterable<Uint8Array>,
    filename: string,
    fields: Record<string, string>,
  ) => Promise<T>,
): Promise<{ result: T; filename: string; fields: Record<string, string> }> {
  const type = request.headers.get('content-type') ?? ''
  if (!type.toLowerCase().startsWith('multipart/form-data') || !request.body) {
    throw badRequest(
      'upload the file as multipart/form-data with fields "purpose" and "file"',
      'file',
    )
  }
  let parser: busboy.Busboy
  try {
    parser = busboy({
      headers: { 'content-type': type },
      // The SDKs and curl send a filename's UTF-8 bytes as they are; busboy reads them as latin1
      // unless told (an RFC 5987 filename* is decoded by its own charset either way).
      defParamCharset: 'utf8',
      limits: { files: 1, fields: 10, fieldSize: 1024 },
    })
  } catch (error) {
    throw badRequest(`malformed multipart body: ${(error as Error).message}`, 'file')
  }
  const fields: Record<string, string> = {}
  let stored: Promise<{ result: T; filename: string }> | null = null
  let fileStream: Readable | null = null
  const source = Readable.fromWeb(request.body as never)
  const finished = new Promise<void>((resolve, reject) => {
    const fail = (error: Error) => {
      fileStream?.destroy(error)
      reject(error)
    }
    parser.on('field', (name, value) => {
      fields[name] = value
    })
    parser.on('file', (name, stream, info) => {
      if (name !== 'file' || stored) {
        // Read past, not kept; a body cut short ends it with an error no one else listens for.
        stream.on('error', () => {})
        stream.resume()
        return
      }
      fileStream = stream
      // busboy delivers `purpose` first when the client sends it first, as the SDKs do.
      const filename = info.filename || 'upload.jsonl'
      stored = sink(stream as AsyncIterable<Uint8Array>, filename, { ...fields }).then(
        (result) => ({ result, filename }),
      )
      // A refusal by the sink (too large, over quota) ends the upload at once: reading stops
      // there, and Bun discards the rest of the body as it arrives.
      stored.catch((error) => {
        reject(error)
        source.destroy()
      })
    })
    // A second file part: refused rather than left unread (which one was meant is unknown).
    parser.on('filesLimit', () =>
      fail(badRequest('the upload has more than one file part; send one file per upload', 'file')),
    )
    parser.on('close', resolve)
    parser.on('error', (error) =>
      fail(badRequest(`malformed multipart body: ${(error as Error).message}`, 'file')),
    )
    // The client hung up or the body's framing broke (busboy never hears of it through pipe()):
    // an aborted request, logged as such.
    source.on('error', (error) => {
      fail(new BodyAborted(String((error as Error)?.message ?? error)))
      parser.destroy()
    })
    let received = 0
    source.on('data', (chunk: Uint8Array) => {
      received += chunk.byteLength
      if (received <= limit.bytes) return
      fail(tooLarge(limit))
      source.unpipe(parser)
      source.destroy()
    })
  })
  source.pipe(parser)
  try {
    await finished
  } catch (error) {
    await (stored as Promise<unknown> | null)?.catch(() => {})
    throw error
  }
  if (!stored)
    throw badRequest(
      // A part without a filename is a text field to multipart, not a file.
      fields.file !== undefined
        ? 'the "file" part has no filename, so it is a text field, not a file; send the JSONL file as a file part (curl -F file=@requests.jsonl, or files.create in the SDKs)'
        : 'the upload has no "file" part; send the JSONL file as the field "file"',
      'file',
    )
  const { result, filename } = await (stored as Promise<{ result: T; filename: string }>)
  return { result, filename, fields }
}
