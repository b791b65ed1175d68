/**
 * The one script of the dashboard, served from the gateway itself (the CSP allows scripts from
 * 'self' only, none inline): a running batch's page listens to the batch's progress stream
 * (docs/events-and-webhooks.md) and, on each event, puts in the page the server's own rendering of it, fetched
 * again — the HTML is made in one place, on the server, and the page is never reloaded. The
 * stream starts from the version the page was rendered at, so an unchanged batch sends nothing.
 * Without scripts, the page's <noscript> refresh reloads it instead.
 */
export const BATCH_PAGE_SCRIPT_PATH = '/dashboard/assets/batch-page.js'

export const BATCH_PAGE_SCRIPT = `'use strict'
;(() => {
  const root = document.querySelector('[data-events]')
  if (!root || typeof EventSource !== 'function') return
  const ENDED = ['completed', 'failed', 'cancelled', 'expired']
  const source = new EventSource(root.getAttribute('data-events'))
  let busy = false
  let again = false
  async function refresh() {
    if (busy) return void (again = true)
    busy = true
    try {
      const response = await fetch(location.href, { credentials: 'same-origin' })
      if (response.ok) {
        const next = new DOMParser().parseFromString(await response.text(), 'text/html')
        const main = next.querySelector('main')
        if (main) document.querySelector('main').replaceWith(document.adoptNode(main))
        document.title = next.title
      }
    } catch (error) {
      // The next event tries again.
    } finally {
      busy = false
      if (again) {
        again = false
        refresh()
      }
    }
  }
  source.addEventListener('batch', (event) => {
    const batch = JSON.parse(event.data)
    document.documentElement.setAttribute('data-batch-version', event.lastEventId)
    refresh()
    if (ENDED.includes(batch.status)) source.close()
  })
})()
`
