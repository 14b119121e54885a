/**
 * The cursor of the executions' list (`Workflows.control`'s `list`, newest
 * change first): the last execution of a page as text, `<updatedAt>:<id>`,
 * for the command's `--cursor` and the dashboard's `cursor=`. Plain code, no
 * @effect/workflow: the dashboard reads it before loading the control.
 */

/** Where the next page starts: below this execution. */
export interface Before {
  readonly updatedAt: number
  readonly executionId: string
}

/** The cursor after a page's last execution. */
export const encode = (last: Before): string => `${last.updatedAt}:${last.executionId}`

/** A cursor read back; undefined when it is not one. */
export const decode = (text: string): Before | undefined => {
  const m = /^(\d{1,16}):(.+)$/s.exec(text)
  if (m === null || !Number.isSafeInteger(Number(m[1]))) return undefined
  return { updatedAt: Number(m[1]), executionId: m[2] }
}

/** The next page's cursor: after the last execution of a full page, else null (no more). */
export const next = (page: ReadonlyArray<Before>, limit: number): string | null =>
  page.length < limit || page.length === 0 ? null : encode(page[page.length - 1])
