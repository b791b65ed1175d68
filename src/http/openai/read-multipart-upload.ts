/**
 * Streams a multipart upload (`purpose` field + `file` part) with busboy: the file part goes
 * straight to the sink as it arrives, never held whole in memory.
 */
import busboy from 'busboy'
import { Readable } from 'node:stream'
import { badRequest } from '../../errors.ts'
import { BodyAborted } from '../../ingest/read-body.ts'

export async function readMultipartUpload<T>(
  request: Request,
  sink: (file: AsyncIterable<Uint8Array>, filename: string, fields: Record<string, string>) => Promise<T>,
): Promise<{ result: T; filename: string; fields: Record<string, string> }> {
  const type = request.headers.get('content-type') ?? ''
  if (!type.toLowerCase().startsWith('multipart/form-data') || !request.body) {
    throw badRequest('upload the file as multipart/form-data with fields "purpose" and "file"', 'file')
  }
  let parser: busboy.Busboy
  try {
    parser = busboy({ headers: { 'content-type': type }, limits: { files: 1, fields: 10, fieldSize: 1024 } })
  } catch (error) {
    throw badRequest(`malformed multipart body: ${(error as Error).message}`, 'file')
  }
  const fields: Record<string, string> = {}
  let stored: Promise<{ result: T; filename: string }> | null = null
  const source = Readable.fromWeb(request.body as never)
  const finished = new Promise<void>((resolve, reject) => {
    // The client hung up (or Bun found the chunk framing broken): an aborted request.
    source.on('error', (error) => {
      const aborted = new BodyAborted(String(error?.message ?? error))
      reject(aborted)
      // Ends the file part too, so the sink sees the error and drops what it stored.
      parser.destroy(aborted)
    })
    parser.on('field', (name, value) => {
      fields[name] = value
    })
    parser.on('file', (name, stream, info) => {
      if (name !== 'file' || stored) {
        stream.resume()
        return
      }
      // busboy delivers `purpose` first when the client sends it first, as the SDKs do.
      const filename = info.filename || 'upload.jsonl'
      stored = sink(stream as AsyncIterable<Uint8Array>, filename, { ...fields }).then((result) => ({ result, filename }))
      // A sink that refuses (the file is over its limit) ends the upload at once: reading stops
      // there, and Bun discards the rest of the body as it arrives.
      stored.catch((error) => {
        reject(error)
        source.destroy()
      })
    })
    parser.on('close', resolve)
    parser.on('error', (error) => reject(badRequest(`malformed multipart body: ${(error as Error).message}`, 'file')))
  })
  source.pipe(parser)
  await finished
  if (!stored) throw badRequest('the upload has no "file" part; send the JSONL file as the field "file"', 'file')
  const { result, filename } = await (stored as Promise<{ result: T; filename: string }>)
  return { result, filename, fields }
}
