/** Small statistics helpers. */

/** The q-th percentile (0..100) by linear interpolation between closest ranks. */
export const percentile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  const pos = (q / 100) * (sorted.length - 1)
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
}

export const median = (values: ReadonlyArray<number>): number => percentile(values, 50)

export interface Summary {
  readonly median: number
  readonly min: number
  readonly max: number
  readonly n: number
}

export const summarize = (values: ReadonlyArray<number>): Summary | undefined => {
  const finite = values.filter((v) => Number.isFinite(v))
  if (finite.length === 0) return undefined
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length }
}

/** A number for a table: 3 significant digits, thousands separated. */
export const fmt = (value: number | undefined): string => {
  if (value === undefined || !Number.isFinite(value)) return "n/a"
  const abs = Math.abs(value)
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US")
  if (abs >= 100) return value.toFixed(0)
  if (abs >= 10) return value.toFixed(1)
  if (abs >= 1) return value.toFixed(2)
  if (abs === 0) return "0"
  return value.toFixed(3)
}
