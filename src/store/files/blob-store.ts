/**
 * Content of uploaded files. On the embedded store it is a file in the data dir; with
 * PostgreSQL it is chunks in the database, so every instance sees every file.
 */
export interface BlobStore {
  /** Streams `content` into storage; resolves with its size. Throws FileTooLarge past `maxBytes`. */
  put(id: string, content: AsyncIterable<Uint8Array>, maxBytes: number): Promise<number>
  read(id: string): ReadableStream<Uint8Array>
  readAll(id: string): Promise<Uint8Array>
  /** Deletes the content, whole or still partial. */
  delete(id: string): Promise<void>
  /**
   * Ids of the content stored (whole or partial), in id order after `after`: the janitor checks
   * them against the file records and uploads in progress and deletes what neither knows.
   */
  listIds(after: string | null, limit: number): Promise<string[]>
  close(): Promise<void>
}

export class FileTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`file larger than ${limit} bytes`)
  }
}
