/**
 * Why a task file did not load, on one line, a syntax error with its
 * `file:line:column` (1-based, as editors take it).
 *
 * Where the location is: tsx (esbuild) puts `file:line:column` in its message
 * (the column 0-based); Node puts `file:line`, the source line and a caret in
 * the stack of a CommonJS file's SyntaxError; an ES module's SyntaxError
 * (Node 20) carries no location at all, so `node --check` is asked for it
 * (one short process, only when loading already failed).
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { errorMessage } from "./format.js"

/** A location in a file. */
export interface Location {
  readonly file: string
  readonly line: number
  readonly column: number
}

const ESBUILD = /^(.+?):(\d+):(\d+): ERROR: (.+)$/m
// Node's "arrow" text: `<file or URL>:<line>`, the source line, then a caret under the column.
const ARROW = /^(\S.*?):(\d+)\r?\n(.*)\r?\n(\s*)\^/

const filePath = (text: string) => (text.startsWith("file://") ? fileURLToPath(text) : text)

/** The location in Node's arrow text (a CommonJS SyntaxError's stack, or `node --check` output). */
export const arrowLocation = (text: string): Location | undefined => {
  const match = ARROW.exec(text)
  if (match === null) return undefined
  return { file: filePath(match[1]), line: Number(match[2]), column: match[4].length + 1 }
}

const checkedLocation = (path: string): Location | undefined => {
  const result = spawnSync(process.execPath, ["--check", path], { encoding: "utf8", timeout: 10_000 })
  return result.status === 0 ? undefined : arrowLocation(result.stderr ?? "")
}

const at = (where: Location) => `${where.file}:${where.line}:${where.column}`

/** The reason a task file at `path` failed to import, on one line. */
export const describeLoadError = (path: string, error: unknown): string => {
  const message = errorMessage(error)
  const esbuild = ESBUILD.exec(message)
  if (esbuild !== null) {
    const where = { file: esbuild[1], line: Number(esbuild[2]), column: Number(esbuild[3]) + 1 }
    return `syntax error at ${at(where)}: ${esbuild[4]}`
  }
  if (error instanceof SyntaxError) {
    const where = arrowLocation(error.stack ?? "") ?? (/\.(c?js|mjs)$/.test(path) ? checkedLocation(path) : undefined)
    return where === undefined ? `syntax error: ${message}` : `syntax error at ${at(where)}: ${message}`
  }
  return message
}
