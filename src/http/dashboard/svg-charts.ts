/**
 * Bar charts as inline SVG, drawn on the server: no script, nothing fetched (the dashboard's
 * Content-Security-Policy allows neither). Every bar carries its value as text and as a <title>,
 * so the figures can be read (and tested) without measuring pixels.
 */
import { html, type Html } from './html.ts'

export interface Bar {
  label: string
  value: number
  /** The value as shown: "$0.001200", "12,400 tokens". */
  text: string
}

const WIDTH = 640
const ROW = 22
const LABEL_W = 190
const VALUE_W = 120

/** One horizontal bar per item (models, providers), longest first as given. */
export function horizontalBars(title: string, bars: readonly Bar[]): Html {
  const max = Math.max(0, ...bars.map((b) => b.value))
  const span = WIDTH - LABEL_W - VALUE_W
  const height = Math.max(1, bars.length) * ROW + 8
  return html`<figure class="chart">
    <figcaption>${title}</figcaption>
    <svg role="img" aria-label="${title}" viewBox="0 0 ${WIDTH} ${height}" width="100%">
      ${
        bars.length === 0
          ? html`<text x="0" y="16" class="dim">nothing in this range</text>`
          : bars.map((bar, i) => {
              const y = i * ROW + 4
              const w = max > 0 ? Math.max(1, (bar.value / max) * span) : 1
              return html`<g>
                <title>${bar.label}: ${bar.text}</title>
                <text x="0" y="${y + 14}" font-size="12">${bar.label}</text>
                <rect x="${LABEL_W}" y="${y}" width="${w.toFixed(1)}" height="16" fill="#0969da" />
                <text x="${LABEL_W + w + 6}" y="${y + 14}" font-size="12" data-value="${bar.value}">
                  ${bar.text}
                </text>
              </g>`
            })
      }
    </svg>
  </figure>`
}

/** One vertical bar per day; the first and last dates under the axis, each value in its <title>. */
export function dailyColumns(title: string, bars: readonly Bar[]): Html {
  const height = 160
  const plot = height - 30
  const max = Math.max(0, ...bars.map((b) => b.value))
  const step = bars.length > 0 ? WIDTH / bars.length : WIDTH
  const barW = Math.max(1, step * 0.8)
  const peak = bars.reduce<Bar | null>((top, b) => (top && top.value >= b.value ? top : b), null)
  return html`<figure class="chart">
    <figcaption>
      ${title}${peak && peak.value > 0 ? html` · peak ${peak.text} on ${peak.label}` : ''}
    </figcaption>
    <svg role="img" aria-label="${title}" viewBox="0 0 ${WIDTH} ${height}" width="100%">
      <line x1="0" y1="${plot}" x2="${WIDTH}" y2="${plot}" stroke="#d0d7de" />
      ${bars.map((bar, i) => {
        const h = max > 0 ? (bar.value / max) * (plot - 4) : 0
        return html`<rect
          x="${(i * step).toFixed(1)}"
          y="${(plot - h).toFixed(1)}"
          width="${barW.toFixed(1)}"
          height="${h.toFixed(1)}"
          fill="#1a7f37"
          data-value="${bar.value}"
          ><title>${bar.label}: ${bar.text}</title></rect
        >`
      })}
      ${
        bars.length > 0
          ? html`<text x="0" y="${height - 8}" font-size="11">${bars[0].label}</text>
              <text x="${WIDTH}" y="${height - 8}" font-size="11" text-anchor="end">
                ${bars.at(-1)!.label}
              </text>`
          : ''
      }
    </svg>
  </figure>`
}
