/**
 * `docket worker --retention`: how long finished items are kept. One
 * duration sets done and cancelled (dead stays for ever, for a person: as the
 * library's default); `done=1h,cancelled=7d,dead=30d` sets each state given;
 * `forever` keeps a state; `0` deletes (done at its complete).
 */
import * as Either from "effect/Either"
import type { Retention } from "../Domain.js"
import { usage, type UsageError } from "./errors.js"
import { parseDuration } from "./input.js"

const STATES = ["done", "cancelled", "dead"] as const
type State = (typeof STATES)[number]

const value = (flag: string, text: string): Either.Either<number | "forever", UsageError> =>
  text.trim() === "forever" ? Either.right("forever") : parseDuration(flag, text)

/** Reads `--retention`: a duration (or forever) for done and cancelled, or state=duration pairs. */
export const parseRetention = (text: string): Either.Either<Retention, UsageError> =>
  Either.gen(function*() {
    const trimmed = text.trim()
    if (!trimmed.includes("=")) {
      const both = yield* value("--retention", trimmed)
      return { done: both, cancelled: both }
    }
    const out: Partial<Record<State, number | "forever">> = {}
    for (const part of trimmed.split(",")) {
      const [name, given, ...rest] = part.split("=").map((s) => s.trim())
      if (rest.length > 0 || given === undefined || given === "") {
        return yield* Either.left(usage(`--retention: "${part.trim()}" is not state=duration (e.g. done=1h,dead=30d)`))
      }
      if (!(STATES as ReadonlyArray<string>).includes(name)) {
        return yield* Either.left(usage(`--retention: "${name}" is not done, cancelled or dead`))
      }
      if (out[name as State] !== undefined) return yield* Either.left(usage(`--retention: ${name} given twice`))
      out[name as State] = yield* value(`--retention ${name}`, given)
    }
    return out
  })

/** A retention as the worker's start line says it: `done 24h, cancelled 24h, dead forever`. */
export const describeRetention = (retention: Retention, read: (ms: number) => string): string =>
  STATES.map((state) => {
    const given = retention[state]
    const shown = given === undefined
      ? (state === "dead" ? "forever" : "24h")
      : given === "forever"
      ? "forever"
      : Number(given) === 0
      ? "0 (deleted at once)"
      : read(Number(given))
    return `${state} ${shown}`
  }).join(", ")
