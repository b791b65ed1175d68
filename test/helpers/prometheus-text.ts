/**
 * A small parser of Prometheus' text exposition format (0.0.4), strict enough to refuse what a
 * scraper would: every sample's family declared by # TYPE first, names and labels well formed,
 * values numbers, a histogram's buckets cumulative and ending with +Inf equal to its _count.
 */
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface Exposition {
  types: Map<string, string>
  help: Map<string, string>
  samples: Sample[]
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped'])

export function parsePrometheusText(text: string): Exposition {
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline')
  const types = new Map<string, string>()
  const help = new Map<string, string>()
  const samples: Sample[] = []
  text
    .slice(0, -1)
    .split('\n')
    .forEach((line, index) => {
      const where = `line ${index + 1} (${JSON.stringify(line)})`
      if (line.startsWith('# HELP ')) {
        const [name, ...rest] = line.slice(7).split(' ')
        if (!NAME.test(name) || rest.length === 0) throw new Error(`bad HELP at ${where}`)
        help.set(name, rest.join(' '))
      } else if (line.startsWith('# TYPE ')) {
        const [name, type, extra] = line.slice(7).split(' ')
        if (!NAME.test(name) || !TYPES.has(type) || extra !== undefined)
          throw new Error(`bad TYPE at ${where}`)
        if (types.has(name)) throw new Error(`TYPE repeated at ${where}`)
        if (samples.some((s) => familyOf(s.name, types) === name))
          throw new Error(`TYPE after its samples at ${where}`)
        types.set(name, type)
      } else if (line.startsWith('#') || line === '') {
        throw new Error(`unexpected comment or blank at ${where}`)
      } else {
        const match = SAMPLE.exec(line)
        if (!match) throw new Error(`bad sample at ${where}`)
        const labels: Record<string, string> = {}
        let rest = match[3] ?? ''
        while (rest.length > 0) {
          const label = LABEL.exec(rest)
          if (!label) throw new Error(`bad labels at ${where}`)
          labels[label[1]] = label[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c))
          rest = rest.slice(label[0].length)
        }
        const value = match[4] === '+Inf' ? Infinity : Number(match[4])
        if (Number.isNaN(value)) throw new Error(`bad value at ${where}`)
        if (!familyOf(match[1], types)) throw new Error(`sample before its TYPE at ${where}`)
        samples.push({ name: match[1], labels, value })
      }
    })
  checkHistograms(types, samples)
  return { types, help, samples }
}

/** The family a sample belongs to: its own name, or a histogram's without _bucket/_sum/_count. */
function familyOf(name: string, types: Map<string, string>): string | null {
  if (types.has(name)) return name
  const base = name.replace(/_(bucket|sum|count)$/, '')
  return types.get(base) === 'histogram' || types.get(base) === 'summary' ? base : null
}

function checkHistograms(types: Map<string, string>, samples: Sample[]) {
  for (const [name, type] of types) {
    if (type !== 'histogram') continue
    const series = new Map<string, Sample[]>()
    for (const s of samples.filter((s) => s.name === `${name}_bucket`)) {
      const { le, ...rest } = s.labels
      if (le === undefined) throw new Error(`${name}_bucket without le`)
      const key = JSON.stringify(rest)
      series.set(key, [...(series.get(key) ?? []), s])
    }
    for (const [key, buckets] of series) {
      const bounds = buckets.map((b) => (b.labels.le === '+Inf' ? Infinity : Number(b.labels.le)))
      for (let i = 1; i < buckets.length; i++) {
        if (!(bounds[i] > bounds[i - 1])) throw new Error(`${name} ${key}: le not increasing`)
        if (buckets[i].value < buckets[i - 1].value)
          throw new Error(`${name} ${key}: buckets not cumulative`)
      }
      if (bounds.at(-1) !== Infinity) throw new Error(`${name} ${key}: no +Inf bucket`)
      const count = samples.find(
        (s) => s.name === `${name}_count` && JSON.stringify(s.labels) === key,
      )
      if (!count || count.value !== buckets.at(-1)!.value)
        throw new Error(`${name} ${key}: _count is not the +Inf bucket`)
      if (!samples.some((s) => s.name === `${name}_sum` && JSON.stringify(s.labels) === key))
        throw new Error(`${name} ${key}: no _sum`)
    }
  }
}

/** The value of the one sample named so with these labels (among others), or undefined. */
export function sampleValue(
  exposition: Exposition,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  return exposition.samples.find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value
}
