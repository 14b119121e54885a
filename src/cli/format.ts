/**
 * Text helpers of the `docket` command's output: columns, plurals, id lists
 * and one-line renderings of multi-line text (error messages, log lines).
 */

/** Pads `text` with spaces on the right to `width` characters. */
export const pad = (text: string, width: number): string => text + " ".repeat(Math.max(0, width - text.length))

/** Pads `text` with spaces on the left to `width` characters (numbers in a column). */
export const padLeft = (text: string, width: number): string =>
  " ".repeat(Math.max(0, width - text.length)) + text

/**
 * Rows of cells as text columns two spaces apart, each as wide as its widest
 * cell; the columns in `right` (by index) aligned right (numbers). The last
 * column is not padded (no trailing spaces).
 */
export const table = (
  rows: ReadonlyArray<ReadonlyArray<string>>,
  right: ReadonlySet<number> = new Set()
): string => {
  const widths: Array<number> = []
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)))
  return rows.map((row) =>
    row.map((cell, i) =>
      right.has(i) ? padLeft(cell, widths[i]) : i === row.length - 1 ? cell : pad(cell, widths[i])
    ).join("  ")
  ).join("\n")
}

/** `text` cut to at most `max` characters, the last one an ellipsis when cut. */
export const clip = (text: string, max: number): string =>
  text.length > max ? `${text.slice(0, max - 1)}…` : text

/** `word`, with an `s` unless `n` is 1. */
export const pluralWord = (n: number, word: string): string => `${word}${n === 1 ? "" : "s"}`

/** `n` and `word`, with an `s` unless `n` is 1: `1 item`, `3 items`. */
export const plural = (n: number, word: string): string => `${n} ${pluralWord(n, word)}`

/** Orders text by code unit, not by locale, so a listing is in the same order on every machine. */
export const compareText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** A span of milliseconds in its largest whole unit: `850ms`, `4.2s` (under 10 s), `42s`, `12m`, `3h`, `2d`. */
export const age = (ms: number): string => {
  const n = Math.max(0, Math.round(ms))
  if (n < 1000) return `${n}ms`
  if (n < 10_000) return `${(Math.floor(n / 100) / 10).toFixed(1)}s`
  if (n < 60_000) return `${Math.floor(n / 1000)}s`
  if (n < 3_600_000) return `${Math.floor(n / 60_000)}m`
  if (n < 86_400_000) return `${Math.floor(n / 3_600_000)}h`
  return `${Math.floor(n / 86_400_000)}d`
}

/** An epoch-ms time as ISO 8601 in UTC to the second: `2030-01-02T03:04:05Z`. */
export const isoSeconds = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

/** Item ids for one line: the first 20, then how many more. */
export const listIds = (ids: ReadonlyArray<number>): string =>
  ids.length <= 20 ? ids.join(", ") : `${ids.slice(0, 20).join(", ")}, … (${ids.length - 20} more)`

/** Every line break, with the white space around it, folded into one space. */
export const foldLines = (text: string): string => text.replace(/\s*\r?\n\s*/g, " ")

/** The text on one line, trimmed. */
export const oneLine = (text: string): string => foldLines(text).trim()

/** An error's text for one line of output: on one line, and at most 500 characters (then an ellipsis). */
export const errorLine = (text: string): string => {
  const line = oneLine(text)
  return line.length > 500 ? `${line.slice(0, 500)}…` : line
}

/** The message of anything thrown or failed with. */
export const errorMessage = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : String(error)
