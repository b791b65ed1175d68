/**
 * The worker side of a dispatch thread (dispatch-thread.ts): lowers the thread's priority, opens
 * the store's connection on `open`, runs each call and posts its result or its error back.
 */
import { lowerThreadPriority } from '../../threads/background-priority.ts'
import { nameThread } from '../../threads/thread-name.ts'
import type { DispatchStore } from './dispatch-store.ts'

export interface DispatchRequest {
  id: number
  method: keyof DispatchStore | 'open' | 'close'
  args: unknown[]
}

export type DispatchReply =
  { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string }

export interface OpenedDispatch {
  dispatch: DispatchStore
  close(): Promise<void> | void
}

declare const self: Worker

export function serveDispatch(open: (args: unknown[]) => OpenedDispatch): void {
  nameThread('mg-dispatch')
  let opened: OpenedDispatch | null = null
  self.onmessage = async (event: MessageEvent<DispatchRequest>) => {
    const { id, method, args } = event.data
    if (method === 'open') {
      // Background work: its wake-ups must not take the event loop's core.
      lowerThreadPriority()
      opened = open(args)
      return
    }
    let reply: DispatchReply
    try {
      if (method === 'close') {
        await opened?.close()
        opened = null
        reply = { id, ok: true, value: null }
      } else {
        const dispatch = opened!.dispatch
        const run = dispatch[method] as (...args: unknown[]) => Promise<unknown>
        reply = { id, ok: true, value: await run.apply(dispatch, args) }
      }
    } catch (error) {
      reply = { id, ok: false, message: (error as Error).message }
    }
    self.postMessage(reply)
  }
}
