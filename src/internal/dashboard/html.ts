/**
 * HTML written with one tagged template that escapes every interpolation:
 * a stored string (a payload, a key, a kind, an error, a result) can only
 * ever become text. Markup is inserted only as an `Html` value, which only
 * this template (or `unsafeRaw`, for constant markup) makes.
 */

/** Markup known to be safe: made by `html` from escaped parts, or by `unsafeRaw` from a constant. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;", "`": "&#96;" }

/** A text escaped for an element's content or a quoted attribute. */
export const escape = (text: string): string => text.replace(/[&<>"'`]/g, (c) => ESCAPES[c])

/** What may be interpolated: text (escaped), numbers, markup, lists of those; null, undefined and false render nothing. */
export type Part = Html | string | number | boolean | null | undefined | ReadonlyArray<Part>

const render = (part: Part): string => {
  if (part === null || part === undefined || part === false || part === true) return ""
  if (part instanceof Html) return part.value
  if (Array.isArray(part)) return part.map(render).join("")
  return escape(String(part))
}

/** The template: constant markup as written, every interpolation escaped unless it is `Html`. */
export const html = (strings: TemplateStringsArray, ...parts: ReadonlyArray<Part>): Html => {
  let out = strings[0]
  for (let i = 0; i < parts.length; i++) out += render(parts[i]) + strings[i + 1]
  return new Html(out)
}

/** Constant markup (never a stored value): for the few places a template cannot be used. */
export const unsafeRaw = (markup: string): Html => new Html(markup)

/** A JSON value as indented text for a `<pre>` (escaped when interpolated). */
export const pretty = (value: unknown): string => {
  if (value === undefined) return ""
  try {
    return JSON.stringify(value, null, 2) ?? String(value)
  } catch {
    return String(value)
  }
}
