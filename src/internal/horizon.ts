/**
 * The xmin horizon held back (docs/operations.md, "The xmin horizon held
 * back"): the threshold's defaults and checks, and the holders as one line of
 * text each, for the worker's warning, `docket stats` and the dashboard.
 */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import type { HorizonHolder, HorizonReport, HorizonThreshold } from "../Domain.js"
import { InvalidInput } from "../Errors.js"
import * as V from "./validate.js"

/**
 * Default: a transaction open 5 minutes holds the horizon back. Far above
 * what any statement of Docket or a web request takes (milliseconds to
 * seconds), so what is reported is a forgotten transaction, a report or a
 * dump; short enough that a queue doing a few hundred claims a second is told
 * before the dead rows it leaves behind (tens of thousands) slow its claims.
 */
export const DEFAULT_AGE_MS = 5 * 60_000

/**
 * Default: an xmin 100,000 transactions old holds the horizon back (a slot,
 * a standby's feedback: PostgreSQL 15 records no time for them). A busy
 * queue assigns a few hundred transaction ids a second (a claim and an
 * outcome batch each take one), so it gets there in minutes, as the age; an
 * idle database never does, and there the hold costs nothing.
 */
export const DEFAULT_TRANSACTIONS = 100_000

const YEAR_MS = 366 * 24 * 3600 * 1000
/** age() is a 32-bit integer: no xmin is older than 2^31 - 1 transactions. */
const MAX_TRANSACTIONS = 2_147_483_647

/** A threshold resolved: its age in ms and its count of transactions. */
export interface Resolved {
  readonly ageMs: number
  readonly transactions: number
}

const part = (name: string) => (e: InvalidInput) => new InvalidInput({ field: "horizon", reason: `${name} ${e.reason}` })

/** The threshold with its defaults, checked (an `InvalidInput` on "horizon" naming which part is wrong). */
export const resolve = (threshold: HorizonThreshold = {}): Either.Either<Resolved, InvalidInput> =>
  Either.all({
    ageMs: Either.mapLeft(
      V.checkMillis("horizon", threshold.age ?? DEFAULT_AGE_MS, 0, YEAR_MS),
      part("age")
    ),
    transactions: Either.mapLeft(
      V.checkIntegerIn("horizon", threshold.transactions ?? DEFAULT_TRANSACTIONS, 0, MAX_TRANSACTIONS),
      part("transactions")
    )
  })

/** A span of milliseconds as a person reads it: `850ms`, `6m 12s` (whole seconds from a second up). */
export const span = (ms: number): string =>
  ms < 1000 ? `${Math.max(0, Math.round(ms))}ms` : Duration.format(Duration.seconds(Math.round(ms / 1000)))

const quoted = (text: string) => JSON.stringify(text)

const xids = (n: number) => `(${n} transaction${n === 1 ? "" : "s"} ago)`

/** What a holder holds back: a slot's catalog_xmin alone holds only the system catalogs. */
export const holdsBack = (h: HorizonHolder): "every table" | "the catalogs only" =>
  h._tag === "Slot" && h.xmin === null ? "the catalogs only" : "every table"

/** The holder's kind and name: `session pid 4242`, `replication slot "standby1"`, `prepared transaction "tx-1"`. */
export const holderName = (h: HorizonHolder): string => {
  switch (h._tag) {
    case "Session":
      return `session pid ${h.pid}`
    case "Slot":
      return `replication slot ${quoted(h.slotName)}`
    case "Prepared":
      return `prepared transaction ${quoted(h.gid)}`
  }
}

/** What PostgreSQL says of the holder, as a list of facts (`application "psql"`, `idle in transaction`, ...). */
export const holderFacts = (h: HorizonHolder): ReadonlyArray<string> => {
  switch (h._tag) {
    case "Session":
      return [
        `application ${quoted(h.applicationName)}`,
        ...(h.user === null ? [] : [`user ${h.user}`]),
        ...(h.backendType === "client backend" ? [] : [h.backendType]),
        ...(h.state === null ? [] : [h.state]),
        h.transactionAgeMs === null ? "no transaction (a standby's feedback)" : `transaction open ${span(h.transactionAgeMs)}`,
        `xmin ${h.xmin} ${xids(h.xminAge)}`,
        ...(h.query === "" ? [] : [`query ${quoted(h.query)}`])
      ]
    case "Slot":
      return [
        h.slotType,
        h.active ? "active" : "inactive",
        ...(h.xmin === null ? [] : [`xmin ${h.xmin} ${xids(h.xminAge ?? 0)}`]),
        ...(h.catalogXmin === null ? [] : [`catalog_xmin ${h.catalogXmin} ${xids(h.catalogXminAge ?? 0)}`]),
        `holds back ${holdsBack(h)}`
      ]
    case "Prepared":
      return [
        `owner ${h.owner}`,
        `prepared ${new Date(h.preparedAt).toISOString().replace(/\.\d+Z$/, "Z")}, ${span(h.ageMs)} ago`,
        `xid ${h.xid} ${xids(h.xidAge)}`
      ]
  }
}

/** One holder as one line: its name and its facts. */
export const describeHolder = (h: HorizonHolder): string => `${holderName(h)} (${holderFacts(h).join(", ")})`

/** The threshold as a person reads it: `5m or 100000 transactions`. */
export const describeThreshold = (r: Resolved): string => `${span(r.ageMs)} or ${r.transactions} transactions`

/** The most holders one line names (the rest are counted). */
export const MAX_NAMED = 5

/** The holders of a report as one text: each described, at most MAX_NAMED, then how many more. */
export const describeHolders = (report: HorizonReport): string => {
  const named = report.holders.slice(0, MAX_NAMED).map(describeHolder).join("; ")
  const more = report.holders.length - MAX_NAMED
  return more > 0 ? `${named}; and ${more} more` : named
}
