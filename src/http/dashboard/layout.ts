/**
 * The dashboard's frame: one inline stylesheet, no inline script, no external resources — the
 * Content-Security-Policy forbids both, so an escaping mistake cannot load or run anything. The
 * one script a page may have is the gateway's own file (batch-page-script.ts).
 */
import { html, Html } from './html.ts'

const CSS = `
:root { --ok: #1a7f37; --bad: #cf222e; --run: #0969da; --wait: #d0d7de; --ink: #1f2328; --dim: #59636e; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #f6f8fa; }
header { display: flex; align-items: center; justify-content: space-between; padding: 10px 24px; background: #fff; border-bottom: 1px solid #d0d7de; }
header .brand { font-weight: 700; color: var(--ink); text-decoration: none; }
header .who { color: var(--dim); margin-right: 12px; }
main { max-width: 1040px; margin: 24px auto; padding: 0 24px; }
section { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 16px 20px; margin-bottom: 20px; }
h1 { font-size: 22px; margin: 0 0 12px; } h2 { font-size: 17px; margin: 0 0 12px; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 8px 6px; border-bottom: 1px solid #eaeef2; vertical-align: top; }
th { color: var(--dim); font-weight: 600; font-size: 13px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
.dim { color: var(--dim); } .small { font-size: 13px; }
figure.chart { margin: 8px 0 16px; } figure.chart figcaption { font-weight: 600; font-size: 13px; margin-bottom: 4px; }
a { color: var(--run); }
.bar { display: flex; height: 12px; min-width: 160px; border-radius: 6px; overflow: hidden; background: var(--wait); }
.bar.big { height: 20px; }
.bar span { display: block; height: 100%; }
.bar .ok { background: var(--ok); } .bar .bad { background: var(--bad); } .bar .run { background: var(--run); }
.bar .cost { background: #8250df; }
.p0 { background: #0969da; } .p1 { background: #bf8700; } .p2 { background: #1a7f37; }
.p3 { background: #cf222e; } .p4 { background: #8250df; } .p5 { background: #57606a; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; }
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; background: #eaeef2; }
.status.completed { background: #dafbe1; color: var(--ok); }
.status.failed, .status.expired, .status.cancelled { background: #ffebe9; color: var(--bad); }
.status.in_progress, .status.finalizing, .status.validating, .status.cancelling { background: #ddf4ff; color: var(--run); }
form.inline { display: inline; }
label { display: block; margin: 8px 0 4px; font-weight: 600; }
input[type=text], input[type=password], input[type=number] { width: 100%; max-width: 420px; padding: 6px 8px; border: 1px solid #d0d7de; border-radius: 6px; font: inherit; }
button { padding: 6px 14px; border: 1px solid #1f883d; border-radius: 6px; background: #1f883d; color: #fff; font: inherit; cursor: pointer; }
button.plain { background: #f6f8fa; color: var(--ink); border-color: #d0d7de; }
button.danger { background: #fff; color: var(--bad); border-color: var(--bad); }
.notice { padding: 10px 14px; border-radius: 6px; margin-bottom: 16px; background: #fff8c5; border: 1px solid #d4a72c; }
.notice.error { background: #ffebe9; border-color: #ff8182; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); gap: 12px; margin: 12px 0; }
.grid div b { display: block; font-size: 20px; }
.downloads a { margin-right: 16px; }
`

export interface LayoutOptions {
  title: string
  /** Reload the page after this many seconds (a running batch). */
  refreshSeconds?: number
  /** Where the reload goes (the page without its one-time notice); this page when absent. */
  refreshUrl?: string
  /** The signed-in account's name: shows it and the sign-out button. */
  account?: string
  /** The gateway's own script for this page; the refresh is then only for browsers without scripts. */
  script?: string
}

export function layout(options: LayoutOptions, body: Html): Html {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        ${refresh(options)}
        ${options.script ? html`<script src="${options.script}" defer></script>` : ''}
        <title>${options.title} · Multigrid</title>
        <style>
          ${new Html(CSS)}
        </style>
      </head>
      <body>
        <header>
          <a class="brand" href="/">Multigrid</a>
          ${
            options.account !== undefined
              ? html`<div>
                  <a href="/">Batches</a> · <a href="/dashboard/usage">Usage</a> ·
                  <span class="who">${options.account}</span>
                  <form class="inline" method="post" action="/dashboard/sign-out">
                    <button class="plain" type="submit">Sign out</button>
                  </form>
                </div>`
              : ''
          }
        </header>
        <main>${body}</main>
      </body>
    </html> `
}

function refresh(options: LayoutOptions): Html | string {
  if (!options.refreshSeconds) return ''
  const meta = html`<meta
    http-equiv="refresh"
    content="${options.refreshSeconds}${options.refreshUrl ? `; url=${options.refreshUrl}` : ''}"
  />`
  return options.script ? html`<noscript>${meta}</noscript>` : meta
}

const SECURITY_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

/** An HTML answer with the dashboard's headers. */
export function htmlResponse(
  status: number,
  page: Html,
  headers: Record<string, string> = {},
): Response {
  return new Response(page.text, { status, headers: { ...headers, ...SECURITY_HEADERS } })
}

/** A 303 after a form post, so reloading the next page does not post again. */
export function seeOther(location: string, headers: Record<string, string> = {}): Response {
  return new Response(null, {
    status: 303,
    headers: { ...headers, location, 'cache-control': 'no-store' },
  })
}
