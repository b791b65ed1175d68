/**
 * HTML by tagged template: every interpolated value is escaped unless it is itself Html, so a
 * batch name or a file's issue can never become markup. Attributes are always written quoted.
 */
const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ENTITIES[c])

/** Markup that is already safe: built by `html` from escaped parts. */
export class Html {
  constructor(readonly text: string) {}
  toString() {
    return this.text
  }
}

type Part = Html | string | number | null | undefined | false | Part[]

const render = (value: Part): string => {
  if (value instanceof Html) return value.text
  if (Array.isArray(value)) return value.map(render).join('')
  if (value === null || value === undefined || value === false) return ''
  return escapeHtml(String(value))
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let text = strings[0]
  for (let i = 0; i < values.length; i++) text += render(values[i]) + strings[i + 1]
  return new Html(text)
}
