/**
 * /metrics in Prometheus' text format (version 0.0.4), read from the
 * database, so one scrape covers every worker on every host.
 *
 * Counters: docket_finished_total{kind,state} and docket_retried_total{kind}
 * count every item that ever finished in a state, and every retry, from the
 * kept history plus what left it (QueueRepo's `totals`, migration 0012: the
 * pruner, `dead retry` and `dead delete` count what they take out), so they
 * never fall, whoever prunes, and `rate()`/`increase()` work on them. The
 * other series are gauges: what is stored now, how old the oldest due item
 * is, and the last hour's finished and retried counts (easy to read on a
 * page; a sliding hour falls as old minutes leave it). For kinds whose groups
 * are limited or paused: docket_items_blocked (due items their group holds
 * back) and docket_groups_oldest_ready_seconds (the oldest due item its group
 * lets start, across the kind's groups). On PostgreSQL, who
 * holds back the xmin horizon past the dashboard's threshold:
 * docket_horizon_held (how many), and per holder its age in seconds (where
 * PostgreSQL records a time) and in transactions, labelled with who it is.
 * Workflows (when the SqlClient is in context): docket_workflow_executions
 * by workflow and state, and docket_workflow_oldest_suspended_seconds.
 */
import type { HorizonHolder, HorizonReport, Total } from "../../Domain.js"
import * as Horizon from "../horizon.js"
import type { StateCount } from "../workflow/counts.js"
import type { Overview } from "./model.js"

/** The Content-Type of the text format. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

// A label value escaped as the format asks: backslash, double quote, newline.
const label = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

const labels = (pairs: Readonly<Record<string, string>>) => {
  const parts = Object.entries(pairs).map(([k, v]) => `${k}="${label(v)}"`)
  return parts.length === 0 ? "" : `{${parts.join(",")}}`
}

interface Family {
  readonly name: string
  readonly help: string
  readonly type?: "gauge" | "counter"
  readonly samples: ReadonlyArray<readonly [Readonly<Record<string, string>>, number]>
}

const family = (f: Family) =>
  [`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type ?? "gauge"}`, ...f.samples.map(([l, v]) => `${f.name}${labels(l)} ${v}`)]
    .join("\n")

// Who a holder is, as labels: what an operator needs to find and end it.
const holderLabels = (h: HorizonHolder): Readonly<Record<string, string>> => {
  switch (h._tag) {
    case "Session":
      return { holder: "session", pid: String(h.pid), application: h.applicationName, user: h.user ?? "", state: h.state ?? "" }
    case "Slot":
      return { holder: "slot", slot: h.slotName, slot_type: h.slotType, active: String(h.active), holds: Horizon.holdsBack(h) }
    case "Prepared":
      return { holder: "prepared", gid: h.gid, owner: h.owner }
  }
}

// In seconds to the ms (PostgreSQL's microseconds would print as 23.135424999999998).
const holderSeconds = (h: HorizonHolder): number | null => {
  const ms = h._tag === "Prepared" ? h.ageMs : h._tag === "Session" ? h.transactionAgeMs : null
  return ms === null ? null : Math.round(ms) / 1000
}

const holderXids = (h: HorizonHolder): number =>
  h._tag === "Session" ? h.xminAge : h._tag === "Prepared" ? h.xidAge : Math.max(h.xminAge ?? 0, h.catalogXminAge ?? 0)

/** The horizon's families (PostgreSQL only: SQLite has no horizon, and none are written). */
const horizonFamilies = (r: HorizonReport): ReadonlyArray<Family> => [
  {
    name: "docket_horizon_held",
    help: `Holders of the xmin horizon of the queue's database past the dashboard's threshold (${Horizon.describeThreshold(r)}): ` +
      "vacuum cannot remove what the queue updates or deletes while it is above 0 (docs/operations.md).",
    samples: [[{}, r.holders.length]]
  },
  {
    name: "docket_horizon_holder_age_seconds",
    help: "How long each holder past the threshold has held the horizon: a session's open transaction, a prepared " +
      "transaction's age (slots record no time: see docket_horizon_holder_xmin_age).",
    samples: r.holders.flatMap((h) => {
      const seconds = holderSeconds(h)
      return seconds === null ? [] : [[holderLabels(h), seconds] as const]
    })
  },
  {
    name: "docket_horizon_holder_xmin_age",
    help: "The age in transactions of the oldest transaction id each holder past the threshold holds (for a slot, " +
      "the older of its xmin and catalog_xmin).",
    samples: r.holders.map((h) => [holderLabels(h), holderXids(h)] as const)
  }
]

/** The workflows' families: executions by workflow and state, the oldest suspended one's wait. */
const workflowFamilies = (counts: ReadonlyArray<StateCount>): ReadonlyArray<Family> => {
  const names = [...new Set(counts.map((c) => c.workflow))].sort()
  const of = (workflow: string, state: string) => counts.find((c) => c.workflow === workflow && c.state === state)
  return [
    {
      name: "docket_workflow_executions",
      help: "Workflow executions stored, by workflow and state (running: a run waits or runs; suspended: waiting for " +
        "a deferred, a clock or a child; complete).",
      samples: names.flatMap((workflow) =>
        (["running", "suspended", "complete"] as const).map((state) => [{ workflow, state }, of(workflow, state)?.count ?? 0] as const)
      )
    },
    {
      name: "docket_workflow_oldest_suspended_seconds",
      help: "How long the workflow's oldest suspended execution has waited since its last change, in seconds (0 when none is).",
      samples: names.map((workflow) => [{ workflow }, (of(workflow, "suspended")?.oldestMs ?? 0) / 1000] as const)
    }
  ]
}

const STATES = ["waiting", "scheduled", "running", "expired", "done", "dead", "cancelled"] as const

/** The exposition of an overview, the counters' totals and the workflows' counts (none without them). */
export const render = (o: Overview, totals: ReadonlyArray<Total>, workflows: ReadonlyArray<StateCount> | null = null): string => {
  // Every kind with items, controls or a count: a kind whose items were all pruned keeps its counters.
  const kindNames = [...new Set([...o.kinds.map((k) => k.kind), ...totals.map((t) => t.kind)])].sort()
  const total = new Map(totals.map((t) => [`${t.kind}\u0000${t.what}`, t.count]))
  const due = new Map(o.oldestDue.map((d) => [d.kind, d]))
  const live = o.workers.filter((w) => w.status === "live")
  const finished = new Map<string, number>()
  for (const r of o.finishedByKind) finished.set(`${r.kind}\u0000${r.state}`, (finished.get(`${r.kind}\u0000${r.state}`) ?? 0) + r.count)
  const retried = new Map<string, number>()
  for (const r of o.retriedByKind) retried.set(r.kind, (retried.get(r.kind) ?? 0) + r.count)
  const hosts = new Map<string, number>()
  for (const w of live) hosts.set(w.host, (hosts.get(w.host) ?? 0) + 1)
  const families: Array<Family> = [
    {
      name: "docket_items",
      help: "Items stored, by kind and state (waiting: due now; scheduled: due later; expired: running with an ended lease).",
      samples: o.kinds.flatMap((k) => STATES.map((state) => [{ kind: k.kind, state }, k.counts[state]] as const))
    },
    {
      name: "docket_oldest_due_seconds",
      help: "How long the kind's oldest due item has waited to start, in seconds (0 when none is due).",
      samples: kindNames.map((kind) => [{ kind }, (due.get(kind)?.ageMs ?? 0) / 1000] as const)
    },
    {
      name: "docket_items_blocked",
      help: "Due items that their group holds back, by kind (kinds whose groups are limited or paused): a paused group, " +
        "a dead item holding it, its rate spent, an ordered group's item behind its head, past an unordered group's free places.",
      samples: o.groupsDue.map((g) => [{ kind: g.kind }, g.blocked] as const)
    },
    {
      name: "docket_groups_oldest_ready_seconds",
      help: "Across the kind's groups, how long its oldest due item that its group lets start has waited, in seconds " +
        "(0 when none is): the latency of a grouped kind without the items that wait for their group by design.",
      samples: o.groupsDue.map((g) => [{ kind: g.kind }, (g.oldestReadyAgeMs ?? 0) / 1000] as const)
    },
    {
      name: "docket_finished_total",
      help: "Items that finished in a state (done, dead, cancelled), by kind, since the queue was made: kept and pruned alike " +
        "(not counted: done items a retention of 0 deletes at once).",
      type: "counter",
      samples: kindNames.flatMap((kind) =>
        (["done", "dead", "cancelled"] as const).map((state) => [{ kind, state }, total.get(`${kind}\u0000${state}`) ?? 0] as const)
      )
    },
    {
      name: "docket_retried_total",
      help: "Failed attempts sent back to waiting (to be retried), by kind, since the queue was made.",
      type: "counter",
      samples: kindNames.map((kind) => [{ kind }, total.get(`${kind}\u0000retried`) ?? 0] as const)
    },
    {
      name: "docket_finished_last_hour",
      help: "Items that finished in the last hour, by kind and state (done, dead, cancelled), from the kept history.",
      samples: kindNames.flatMap((kind) =>
        (["done", "dead", "cancelled"] as const).map((state) => [{ kind, state }, finished.get(`${kind}\u0000${state}`) ?? 0] as const)
      )
    },
    {
      name: "docket_retried_last_hour",
      help: "Failed attempts sent back to waiting (to be retried) in the last hour, by kind.",
      samples: kindNames.map((kind) => [{ kind }, retried.get(kind) ?? 0] as const)
    },
    {
      name: "docket_kind_paused",
      help: "1 when the kind is paused (no worker starts its items).",
      samples: o.kinds.map((k) => [{ kind: k.kind }, k.paused ? 1 : 0] as const)
    },
    {
      name: "docket_kind_live_workers",
      help: "Live worker pools that claim the kind (a pool claiming every kind counts for each).",
      samples: kindNames.map((kind) => [{ kind }, live.filter((w) => w.kinds === null || w.kinds.includes(kind)).length] as const)
    },
    {
      name: "docket_workers",
      help: "Live worker pools, by host.",
      samples: [...hosts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([host, n]) => [{ host }, n] as const)
    },
    {
      name: "docket_workers_running",
      help: "Items running in live worker pools at their last heartbeat, by host.",
      samples: [...hosts.keys()].sort().map((host) => [
        { host },
        live.filter((w) => w.host === host).reduce((n, w) => n + w.running, 0)
      ] as const)
    }
  ]
  if (o.horizon !== null) families.push(...horizonFamilies(o.horizon))
  if (workflows !== null) families.push(...workflowFamilies(workflows))
  return families.map(family).join("\n") + "\n"
}
