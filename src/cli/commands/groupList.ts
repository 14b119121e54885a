/**
 * `docket group list KIND [--limit N] [--cursor GROUP] [--json]`: a kind's
 * groups with unfinished items (`QueueRepo.listGroups`), a page at a time in
 * group order: each with its items by state, its first item, and whether a
 * failure holds it (an ordered group whose first item waits for its retry).
 * A kind can have a million groups: the page's last line says how to ask for
 * the next.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as QueueRepo from "../../QueueRepo.js"
import { DEFAULT_GROUP_PAGE } from "../../internal/store/groupList.js"
import { age, table } from "../format.js"
import { databaseOption, integerOption, jsonOption, withDefault } from "../options.js"
import { withExistingRepo } from "../queue.js"
import { kindArg } from "./kind.js"

const HEAD = ["group", "due", "scheduled", "running", "retrying", "first item", "held by a failure"]
const COUNTS = new Set([1, 2, 3, 4])

const headCell = (g: QueueRepo.GroupInfo, now: number) => {
  const { attempts, id, runAt, state } = g.head
  if (state === "running") return `#${id} running (attempt ${attempts})`
  const when = runAt > now ? `due in ${age(runAt - now)}` : "due"
  return attempts > 0 ? `#${id} ${when}, retry after ${attempts} ${attempts === 1 ? "attempt" : "attempts"}` : `#${id} ${when}`
}

/** A page of groups as a text table. */
export const groupTable = (groups: ReadonlyArray<QueueRepo.GroupInfo>, now: number): string =>
  table([
    HEAD,
    ...groups.map((g) => [
      g.group,
      String(g.counts.due),
      String(g.counts.scheduled),
      String(g.counts.running),
      String(g.counts.retrying),
      headCell(g, now),
      g.blocked ? `yes: ${g.head.lastError ?? "failed"}` : "-"
    ])
  ], COUNTS)

const print = (kind: string, page: QueueRepo.GroupPage, json: boolean) => {
  if (json) return Console.log(JSON.stringify(page))
  if (page.groups.length === 0) return Console.log(`no groups of ${kind} with unfinished items`)
  const next = page.cursor === null ? "" : `\nnext page: docket group list ${kind} --cursor ${JSON.stringify(page.cursor)}`
  return Console.log(groupTable(page.groups, Date.now()) + next)
}

/** `docket group list`. */
export const groupList = Command.make(
  "list",
  {
    database: databaseOption,
    kind: kindArg,
    limit: integerOption("limit", "Groups per page, in group order, from 1 to 1000.", { min: 1, max: 1000 }).pipe(
      withDefault(DEFAULT_GROUP_PAGE)
    ),
    cursor: Options.text("cursor").pipe(
      Options.withPseudoName("<group>"),
      Options.withDescription("The next page: the groups after this one (the cursor the previous page printed)."),
      Options.optional
    ),
    json: jsonOption
  },
  ({ cursor, database, json, kind, limit }) =>
    withExistingRepo(database, (repo) => repo.listGroups(kind, { limit, after: Option.getOrUndefined(cursor) })).pipe(
      Effect.flatMap((page) => print(kind, page, json))
    )
).pipe(
  Command.withDescription(
    "Lists a kind's groups with unfinished items: due, scheduled, running and retrying items, the first item " +
      "(in an ordered group, what the others wait behind), and whether a failure holds the group."
  )
)
