/**
 * Docket's migration files: forward-only numbered SQL files in
 * `migrations/pg/` and `migrations/sqlite/` (the same numbers in both), read
 * by our own loader (no `.ts` imports, so it works under tsx, vitest and
 * plain node alike).
 */
import * as Effect from "effect/Effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { MigrationFailed } from "../Errors.js"

/**
 * Where the SQL files are: beside the package's root, seen from this module
 * (src/internal/) or from the bundled command (dist/).
 */
export const directory = (dialect: "pg" | "sqlite"): string => {
  const candidates = [`../../migrations/${dialect}/`, `../migrations/${dialect}/`]
    .map((path) => fileURLToPath(new URL(path, import.meta.url)))
  return candidates.find((dir) => existsSync(`${dir}0001_items.sql`)) ?? candidates[0]
}

/** One migration file: its number, name and statements. */
export interface MigrationFile {
  readonly id: number
  readonly name: string
  readonly statements: ReadonlyArray<string>
}

/**
 * Splits a migration file at `;` ending a line (Docket's migration files keep
 * to that), except inside dollar-quoted text (a function's body).
 */
export const splitStatements = (text: string): ReadonlyArray<string> => {
  const statements: Array<string> = []
  let start = 0
  let quote: string | undefined
  const token = /\$[A-Za-z_]*\$|;[ \t]*(?:\r?\n|$)/g
  for (let match = token.exec(text); match !== null; match = token.exec(text)) {
    if (match[0].startsWith("$")) {
      if (quote === undefined) quote = match[0]
      else if (quote === match[0]) quote = undefined
    } else if (quote === undefined) {
      statements.push(text.slice(start, match.index))
      start = match.index + match[0].length
    }
  }
  statements.push(text.slice(start))
  return statements
    .map((statement) => statement.replace(/^\s*--.*$/gm, "").trim())
    .filter((statement) => statement.length > 0)
}

/** Reads the migration files of a dialect, in order. */
export const files = (dialect: "pg" | "sqlite"): Effect.Effect<ReadonlyArray<MigrationFile>, MigrationFailed> =>
  Effect.try({
    try: () => {
      const dir = directory(dialect)
      return readdirSync(dir)
        .flatMap((file) => {
          const match = /^(\d+)_([\w-]+)\.sql$/.exec(file)
          return match === null
            ? []
            : [{ id: Number(match[1]), name: match[2], statements: splitStatements(readFileSync(dir + file, "utf8")) }]
        })
        .sort((a, b) => a.id - b.id)
    },
    catch: (cause) => new MigrationFailed({ reason: `cannot read the migration files for ${dialect}`, cause })
  })
