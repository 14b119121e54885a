/**
 * The group scenarios' arithmetic over runs (test/reliability/groups.ts):
 * reading the runs the task recorded (fixtures/reliability/groups/_record.mts)
 * and judging them, per group, against a kind's `perGroup` limits.
 *
 * What is exactly provable from the records, and so what is checked:
 *
 * - A run's handler runs inside its claim's lease, as long as the lease is
 *   renewed (a process frozen longer than its lease loses it and says so;
 *   none may, here). The claim lets at most N leases of a group be live at
 *   once, so at most N handlers of a group run at once. A run is counted from
 *   its start line to its end line; a run of a killed process that has no end
 *   line to the end of the lease its item had when the process was killed
 *   (read after the kill: nobody renews it any more), as the claim counts it;
 *   without a known lease end, forever (the strictest reading). A run whose
 *   end line was written but whose outcome the kill kept from the database
 *   still held its lease after its end line: counting it only to the end line
 *   can hide an overlap, never invent one.
 * - What a lease cannot promise: a live process frozen longer than its lease
 *   (on this 2-core machine under a load of 14, a worker stalled 3.6 s with
 *   a 2 s lease) loses it while its handler still runs; the item is claimed
 *   again elsewhere, and the two runs overlap. Its writes are refused (the
 *   claim's token), and it says so ("lease lost", "completion refused"). Such
 *   a run is counted apart (`lost`), never as a breach: it is explained only
 *   by its own process's report for that item.
 * - Ordered, N = 1: a group's items start in enqueue order, and after a run
 *   of item i the next run in the group is item i again (its run did not
 *   finish: killed) or an item that never ran (it did). Enqueue order is
 *   exact where an enqueue had returned before the other began; for two
 *   enqueues in flight at once it is the order their transactions committed
 *   in. On SQLite that is id order (an id is taken under the write lock); on
 *   PostgreSQL an id is taken before its transaction commits, so of two
 *   enqueues in flight at once the later id may commit, and start, first.
 *   So the judge is given which item must precede which (`precedes`): id
 *   order on SQLite, "returned before the other was called" on PostgreSQL.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { maxRunning, profile } from "./controlRuns.js"

/** One run of an item, as its handler recorded it (this machine's clock). */
export interface GroupRun {
  readonly item: number
  readonly kind: string
  readonly group: string
  readonly seq: number
  readonly producer: number
  readonly attempt: number
  readonly pid: number
  readonly start: number
  /** Just before the handler returned; null if it never did (its process was killed). */
  readonly end: number | null
}

/** Every run recorded in `dir` (a file per worker process), in start order. */
export const readGroupRuns = (dir: string): Array<GroupRun> => {
  const runs = new Map<string, { -readonly [K in keyof GroupRun]: GroupRun[K] }>()
  const ends = new Map<string, number>()
  for (const name of readdirSync(dir).filter((n) => n.startsWith("run-"))) {
    for (const text of readFileSync(join(dir, name), "utf8").split("\n")) {
      if (text.trim() === "") continue
      let line: Omit<GroupRun, "start" | "end"> & { readonly event: "start" | "end"; readonly at: number }
      try {
        line = JSON.parse(text) as typeof line
      } catch {
        // A process killed in the middle of a write leaves half a line: not a run.
        continue
      }
      const key = `${line.pid} ${line.item} ${line.attempt}`
      if (line.event === "end") {
        ends.set(key, line.at)
        continue
      }
      const { attempt, group, item, kind, pid, producer, seq } = line
      runs.set(key, { item, kind, group, seq, producer, attempt, pid, start: line.at, end: null })
    }
  }
  for (const [key, end] of ends) {
    const run = runs.get(key)
    if (run !== undefined) run.end = end
  }
  return [...runs.values()].sort((a, b) => a.start - b.start || a.item - b.item)
}

/**
 * The items each worker process reported its lease lost for ("lease lost
 * <kind> #<id>", or a refused outcome's line naming `id=<id>`), from the lines
 * it printed: pid -> item ids.
 */
export const reportedLost = (workers: ReadonlyArray<{ readonly pid: number; readonly kept: ReadonlyArray<string> }>) =>
  new Map(workers.map((w) => [w.pid, new Set(w.kept.flatMap((line) => {
    const m = /lease lost \S+ #(\d+)|(?:lease lost|refused).*\bid=(\d+)/.exec(line)
    return m === null ? [] : [Number(m[1] ?? m[2])]
  }))]))

/**
 * The runs whose own process claimed their item again while they ran (a run
 * of a later attempt of the item in the same process, started before this
 * one's end line, or this one has none): that process held a new claim of
 * the item, so this run's lease had been lost (a freeze longer than the
 * lease), though a SIGKILL can cut off the process's report of it. Counted
 * as lost, as a reported one is. (A claim that took a live lease would show
 * across processes, which this does not excuse.)
 */
export const supersededInProcess = (runs: ReadonlyArray<GroupRun>): Lost => {
  const superseded = new Set<GroupRun>()
  for (const r of runs) {
    const end = r.end ?? Infinity
    if (runs.some((x) => x.pid === r.pid && x.item === r.item && x.attempt > r.attempt && x.start < end)) superseded.add(r)
  }
  return (r) => superseded.has(r)
}

/** The items of which some run returned. */
export const finishedItems = (runs: ReadonlyArray<GroupRun>): Set<number> =>
  new Set(runs.filter((r) => r.end !== null).map((r) => r.item))

const byGroup = (runs: ReadonlyArray<GroupRun>) => {
  const groups = new Map<string, Array<GroupRun>>()
  for (const r of runs) {
    const list = groups.get(r.group) ?? []
    list.push(r)
    groups.set(r.group, list)
  }
  return groups
}

const show = (r: GroupRun) => `item ${r.item} attempt ${r.attempt} pid ${r.pid} ${r.start}-${r.end ?? "killed"}`

/** Where a run without an end line ends: its lease's end after the kill, if known. */
export type EndOf = (run: GroupRun) => number | undefined

/** Whether the run's own process reported its lease lost (or its outcome refused) for that item. */
export type Lost = (run: GroupRun) => boolean

/** A run's span: start to end line, else to `endOf` (the lease's end), else forever. */
const spanOf = (endOf: EndOf) => (r: GroupRun) => ({ start: r.start, end: r.end ?? endOf(r) ?? Infinity })

/**
 * The most runs of one group at once, over every group, and the groups that
 * had more than `limit`; runs whose lease was lost (`lost`) are left out.
 */
export const mostPerGroup = (runs: ReadonlyArray<GroupRun>, endOf: EndOf, limit: number, lost: Lost = () => false) => {
  let most = 0
  const over: Array<string> = []
  for (const [group, list] of byGroup(runs)) {
    const n = maxRunning(profile(list.filter((r) => !lost(r)).map(spanOf(endOf))))
    most = Math.max(most, n)
    if (n > limit) over.push(`group ${group}: ${n} runs at once (limit ${limit})`)
  }
  return { most, over }
}

/** The verdict on an ordered kind's runs with concurrency 1. */
export interface OrderVerdict {
  /** First starts out of enqueue order, items never started, a run of an item after another item had started behind it. */
  readonly disorder: ReadonlyArray<string>
  /** Two runs of a group at once (a killed run counted to its lease's end). */
  readonly overlaps: ReadonlyArray<string>
  /** Runs of an item after a run of it that did not return (a kill) and had not lost its lease: the same item again, as it must be. */
  readonly rerunsAfterKill: number
  /** Of those, the reruns that began when the killed run's lease had ended (all of them must). */
  readonly rerunsAfterLeaseEnd: number
  /** Overlaps and reruns explained by the earlier run's process reporting that item's lease lost. */
  readonly afterLostLease: number
}

/** Whether item `a` must start before item `b` of its group (default: id order). */
export type Precedes = (a: number, b: number) => boolean

/**
 * Judges an ordered group (`perGroup: { concurrency: 1, ordered: true }`):
 * `ids` are each group's enqueued item ids.
 */
export const judgeOrdered = (
  runs: ReadonlyArray<GroupRun>,
  ids: ReadonlyMap<string, ReadonlyArray<number>>,
  endOf: EndOf,
  killedPids: ReadonlySet<number>,
  lost: Lost,
  precedes: Precedes = (a, b) => a < b
): OrderVerdict => {
  const disorder: Array<string> = []
  const overlaps: Array<string> = []
  let afterLostLease = 0
  let rerunsAfterKill = 0
  let rerunsAfterLeaseEnd = 0
  const groups = byGroup(runs)
  for (const [group, order] of ids) {
    const list = groups.get(group) ?? []
    const firsts: Array<number> = []
    for (const r of list) if (!firsts.includes(r.item)) firsts.push(r.item)
    const never = order.filter((id) => !firsts.includes(id))
    if (never.length > 0) disorder.push(`group ${group}: items ${never.join(",")} never started`)
    for (let i = 0; i < firsts.length; i++) {
      for (let j = i + 1; j < firsts.length; j++) {
        if (precedes(firsts[j], firsts[i])) disorder.push(`group ${group}: item ${firsts[j]} started after item ${firsts[i]}, which it precedes`)
      }
    }
    const seen = new Set<number>([list[0]?.item])
    for (let k = 1; k < list.length; k++) {
      const [prev, next] = [list[k - 1], list[k]]
      const prevEnd = spanOf(endOf)(prev).end
      // A pair explained by the earlier run's lost lease counts once.
      if (lost(prev) && (next.start < prevEnd || next.item === prev.item)) afterLostLease++
      if (next.start < prevEnd && lost(prev)) {
        // explained: counted above
      } else if (next.start < prevEnd) {
        overlaps.push(`group ${group}: item ${next.item} started at ${next.start}, before item ${prev.item} (pid ${prev.pid}) ended at ${prevEnd}`)
      }
      if (prev.end === null && !lost(prev)) {
        // Killed in its run: the group waits for it, and it runs again first.
        if (next.item !== prev.item) disorder.push(`group ${group}: item ${next.item} ran after item ${prev.item}'s killed run, before it ran again`)
        else {
          rerunsAfterKill++
          const leaseEnd = endOf(prev)
          if (leaseEnd !== undefined && next.start >= leaseEnd) rerunsAfterLeaseEnd++
        }
      } else if (next.item === prev.item) {
        // It returned, but its outcome may not have been written before its process was killed.
        if (!lost(prev) && !killedPids.has(prev.pid)) disorder.push(`group ${group}: item ${prev.item} ran again after a run that returned in a live process: ${show(prev)}, then ${show(next)}`)
      } else if (seen.has(next.item)) {
        disorder.push(`group ${group}: item ${next.item} ran again after item ${prev.item}, which started after it`)
      }
      seen.add(next.item)
    }
  }
  return { disorder, overlaps, rerunsAfterKill, rerunsAfterLeaseEnd, afterLostLease }
}
