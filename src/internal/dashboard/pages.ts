/**
 * The pages, as functions from what the read model returned to HTML: every
 * stored string goes through the escaping template (html.ts). Each page works
 * without JavaScript: filters are GET forms, actions POST forms.
 */
import type { HorizonHolder, HorizonReport, Item, KindInfo, ListState, PerGroupInfo, ScheduleInfo, WorkerInfo } from "../../Domain.js"
import * as Horizon from "../horizon.js"
import { type Html, html, pretty } from "./html.js"
import { actionForm, age, canAct, link, page, time, type View } from "./layout.js"
import type { BulkAction, Matched } from "./bulk.js"
import { CHART_JS_PATH, UPLOT_CSS_PATH, UPLOT_JS_PATH } from "./chart.js"
import { type ItemFilter, type Overview, periodText } from "./model.js"

const STATES: ReadonlyArray<ListState> = ["waiting", "scheduled", "running", "done", "dead", "cancelled"]

/** An item's state as a person reads it: waiting splits into due and scheduled. */
const shownState = (item: Item, now: number): string =>
  item.state === "waiting" ? (item.runAt > now ? "scheduled" : "waiting") : item.state

const stateCell = (state: string) => html`<span class="state-${state}">${state}</span>`

const clip = (text: string | null, max = 120) => (text === null ? "" : text.length > max ? `${text.slice(0, max)}…` : text)

const kindLink = (view: View, kind: string, state?: string) => html`<a href="${link(view, "/items", { kind, state })}">${kind}</a>`

const countCell = (view: View, kind: string, state: string, n: number) =>
  html`<td class="n">${n === 0 ? html`<span class="muted">0</span>` : html`<a href="${link(view, "/items", { kind, state })}">${n}</a>`}</td>`

/** The overview: counts by kind and state, the oldest due age, throughput over the last hour, controls, workers. */
export const overviewPage = (view: View, o: Overview): Html => {
  const due = new Map(o.oldestDue.map((d) => [d.kind, d]))
  const live = o.workers.filter((w) => w.status === "live")
  const total = (pick: (k: KindInfo) => number) => o.kinds.reduce((n, k) => n + pick(k), 0)
  const hour = o.throughput.reduce((t, m) => ({ done: t.done + m.done, dead: t.dead + m.dead, retried: t.retried + m.retried }), {
    done: 0, dead: 0, retried: 0
  })
  const peak = Math.max(1, ...o.throughput.map((m) => m.done + m.dead + m.cancelled + m.retried))
  const controlled = o.kinds.filter((k) => k.paused || k.concurrency !== null || k.rate !== null)
  return page(view, "Overview", html`<h1>Overview</h1>
<div id="live-overview" data-live>
${horizonSection(o.horizon)}<div class="cards">
<div class="card"><div class="muted">waiting</div><div class="v">${total((k) => k.counts.waiting + k.counts.expired)}</div></div>
<div class="card"><div class="muted">running</div><div class="v">${total((k) => k.counts.running)}</div></div>
<div class="card"><div class="muted">scheduled</div><div class="v">${total((k) => k.counts.scheduled)}</div></div>
<div class="card"><div class="muted">dead</div><div class="v bad">${total((k) => k.counts.dead)}</div></div>
<div class="card"><div class="muted">done, last hour</div><div class="v good">${hour.done}</div></div>
<div class="card"><div class="muted">dead, last hour</div><div class="v bad">${hour.dead}</div></div>
<div class="card"><div class="muted">retried, last hour</div><div class="v">${hour.retried}</div></div>
<div class="card"><div class="muted">live workers</div><div class="v">${live.length}</div></div>
</div>
<h2>Kinds</h2>
${o.kinds.length === 0 ? html`<p class="muted">No items yet.</p>` : html`<table id="kinds">
<thead><tr><th>kind</th><th class="n">waiting</th><th class="n">scheduled</th><th class="n">running</th><th class="n">done</th><th class="n">dead</th><th class="n">cancelled</th><th class="n">oldest due</th><th>controls</th></tr></thead>
<tbody>${
    o.kinds.map((k) => {
      const d = due.get(k.kind)
      return html`<tr><td>${kindLink(view, k.kind)}</td>${countCell(view, k.kind, "waiting", k.counts.waiting + k.counts.expired)}${
        countCell(view, k.kind, "scheduled", k.counts.scheduled)
      }${countCell(view, k.kind, "running", k.counts.running)}${countCell(view, k.kind, "done", k.counts.done)}${
        countCell(view, k.kind, "dead", k.counts.dead)
      }${countCell(view, k.kind, "cancelled", k.counts.cancelled)}<td class="n">${d === undefined ? html`<span class="muted">-</span>` : age(d.ageMs)}</td><td>${
        controls(k)
      }</td></tr>`
    })
  }</tbody></table>`}
</div>
<h2>Finished and retried per minute, last hour</h2>
<div id="throughput-chart" class="chart" data-src="${view.base}/api/throughput?minutes=60" role="img" aria-label="items done, dead and cancelled and attempts retried per minute over the last hour (the table below has the figures)"></div>
<div id="live-throughput" data-live>
${o.throughput.length === 0 ? html`<p class="muted">Nothing finished or retried in the last hour.</p>` : html`<table id="throughput">
<thead><tr><th>minute (UTC)</th><th class="n">done</th><th class="n">dead</th><th class="n">cancelled</th><th class="n">retried</th><th></th></tr></thead>
<tbody>${
    [...o.throughput].reverse().map((m) =>
      html`<tr><td>${time(m.minute)}</td><td class="n">${m.done}</td><td class="n">${m.dead}</td><td class="n">${m.cancelled}</td><td class="n">${m.retried}</td><td><meter min="0" max="${peak}" value="${
        m.done + m.dead + m.cancelled + m.retried
      }"></meter></td></tr>`
    )
  }</tbody></table>`}
<h2>Paused and limited kinds</h2>
${controlled.length === 0 ? html`<p class="muted">None.</p>` : html`<ul>${controlled.map((k) => html`<li>${kindLink(view, k.kind)}: ${controls(k)}</li>`)}</ul>`}
<h2>Live workers</h2>
${live.length === 0 ? html`<p class="muted">No live worker.</p>` : workerTable(view, live)}
</div>`, chartHead(view))
}

// How long a holder has held the horizon: a time where PostgreSQL records one, else the xmin's age in transactions.
const heldFor = (h: HorizonHolder): string => {
  if (h._tag === "Prepared") return Horizon.span(h.ageMs)
  if (h._tag === "Session" && h.transactionAgeMs !== null) return Horizon.span(h.transactionAgeMs)
  const xids = h._tag === "Session" ? h.xminAge : Math.max(h.xminAge ?? 0, h.catalogXminAge ?? 0)
  return `${xids} transactions`
}

/** Who holds back the xmin horizon (PostgreSQL), at the top of the overview while anything does. */
const horizonSection = (report: HorizonReport | null): Html =>
  report === null || report.holders.length === 0 ? html`` : html`<div id="horizon" class="error">
<h2>Vacuum held back</h2>
<p>The xmin horizon of the queue's database is held back past ${Horizon.describeThreshold(report)}: vacuum cannot remove
the rows the queue updates or deletes meanwhile, and claims slow down as they pile up. End what holds it
(docs/operations.md, "The xmin horizon held back").</p>
<table><thead><tr><th>holder</th><th>held for</th><th>what PostgreSQL says of it</th></tr></thead>
<tbody>${
    report.holders.map((h) => html`<tr><td>${Horizon.holderName(h)}</td><td>${heldFor(h)}</td><td>${Horizon.holderFacts(h).join(", ")}</td></tr>`)
  }</tbody></table>
</div>
`

// The chart's files: uPlot's style sheet and script, then the dashboard's script that draws it.
const chartHead = (view: View): Html =>
  html`<link rel="stylesheet" href="${view.base}${UPLOT_CSS_PATH}"><script src="${view.base}${UPLOT_JS_PATH}" defer></script><script src="${view.base}${CHART_JS_PATH}" defer></script>`

const controls = (k: KindInfo): Html =>
  html`${k.paused ? html`<span class="badge warn">paused</span> ` : ""}${
    k.concurrency === null ? "" : html`<span class="badge">concurrency ${k.concurrency}</span> `
  }${k.rate === null ? "" : html`<span class="badge">rate ${k.rate.limit} per ${age(k.rate.periodMs)}</span>`}`

/** The item list: the filter form, a page of items, the link to the next page. */
export const itemsPage = (
  view: View,
  filter: ItemFilter,
  result: { readonly items: ReadonlyArray<Item>; readonly cursor: string | null },
  now: number,
  notice: string | null
): Html => {
  const query = { state: filter.state, kind: filter.kind, key: filter.key, q: filter.q }
  return page(view, "Items", html`<h1>Items</h1>
${notice === null ? "" : html`<p class="badge good" id="notice">${notice}</p>`}
<form class="filters" method="get" action="${view.base}/items">
<label>state <select name="state"><option value="">any</option>${
    STATES.map((s) => html`<option value="${s}"${filter.state === s ? html` selected` : ""}>${s}</option>`)
  }</select></label>
<label>kind <input name="kind" value="${filter.kind ?? ""}"></label>
<label>key <input name="key" value="${filter.key ?? ""}"></label>
<label>text in payload or error <input name="q" value="${filter.q ?? ""}"></label>
<button type="submit">Filter</button> <a href="${view.base}/items">clear</a></form>
${canAct(view) && result.items.length > 0 ? html`<div id="bulk">Every item of this filter: ${
    BULK.map(([action, label]) => actionForm(view, `/items/bulk/${action}`, label, { danger: action === "cancel" || action === "delete", fields: filterFields(filter) }))
  }</div>` : ""}
<div id="live-items" data-live>
${result.items.length === 0 ? html`<p class="muted">No items${result.cursor === null ? "" : " in these rows"}.</p>` : html`<table id="items">
<thead><tr><th class="n">id</th><th>kind</th><th>state</th><th>key</th><th class="n">attempts</th><th>created (UTC)</th><th>finished (UTC)</th><th>last error</th></tr></thead>
<tbody>${
    result.items.map((i) =>
      html`<tr><td class="n"><a href="${view.base}/items/${i.id}">${i.id}</a></td><td>${i.kind}</td><td>${stateCell(shownState(i, now))}</td><td>${
        i.key ?? ""
      }</td><td class="n">${i.attempts}</td><td>${time(i.createdAt)}</td><td>${time(i.finishedAt)}</td><td>${clip(i.lastError)}</td></tr>`
    )
  }</tbody></table>`}
<p class="pager">${
    result.cursor === null
      ? html`<span class="muted">End of the list.</span>`
      : html`<a rel="next" href="${link(view, "/items", { ...query, cursor: result.cursor })}">Next page</a>`
  } · <a href="${link(view, "/items", query)}">First page</a></p>
</div>`)
}

/** One item: its fields, payload, result, every attempt's error, its timeline, and the actions its state allows. */
export const itemPage = (view: View, item: Item, now: number, notice: string | null, group: Html): Html => {
  const state = shownState(item, now)
  const act = (action: string, label: string, danger = false) => actionForm(view, `/items/${item.id}/${action}`, label, { danger })
  const actions = [
    item.state === "dead" ? act("retry", "Retry") : "",
    item.state === "waiting" || item.state === "running" ? act("cancel", "Cancel", true) : "",
    item.state === "dead" ? act("delete", "Delete", true) : "",
    state === "scheduled" ? act("run-now", "Run now") : ""
  ]
  // Who ran it: the holder (running, or done), else the worker of its last failed attempt.
  const worker = item.claimedBy ?? item.errors[item.errors.length - 1]?.worker ?? null
  const timeline: Array<readonly [number, string, string | null]> = [
    [item.createdAt, "enqueued", null],
    ...item.errors.map((e) => [e.at, `attempt ${e.attempt} failed`, e.worker] as const),
    ...(item.finishedAt === null ? [] : [[item.finishedAt, item.state, worker] as const])
  ]
  return page(view, `Item ${item.id}`, html`<h1>Item ${item.id} <span class="badge">${stateCell(state)}</span></h1>
${notice === null ? "" : html`<p class="badge good" id="notice">${notice}</p>`}
<div id="live-item" data-live>
${canAct(view) ? html`<div id="actions">${actions}</div>` : ""}
<table id="fields"><tbody>
<tr><th>kind</th><td>${kindLink(view, item.kind)}</td></tr>
<tr><th>key</th><td>${item.key ?? html`<span class="muted">none</span>`}</td></tr>
<tr><th>group</th><td id="group">${group}</td></tr>
<tr><th>priority</th><td>${item.priority}</td></tr>
<tr><th>attempts</th><td>${item.attempts}${item.maxAttempts === null ? "" : ` of ${item.maxAttempts}`}${item.snoozes > 0 ? ` (${item.snoozes} snoozes)` : ""}</td></tr>
<tr><th>run after</th><td>${time(item.runAt)}</td></tr>
<tr><th>worker</th><td>${worker ?? html`<span class="muted">none</span>`}</td></tr>
<tr><th>lease until</th><td>${time(item.leaseUntil)}</td></tr>
<tr><th>created</th><td>${time(item.createdAt)}</td></tr>
<tr><th>updated</th><td>${time(item.updatedAt)}</td></tr>
<tr><th>finished</th><td>${time(item.finishedAt)}</td></tr>
<tr><th>last error</th><td>${item.lastError === null ? html`<span class="muted">none</span>` : html`<pre>${item.lastError}</pre>`}</td></tr>
</tbody></table>
<h2>Payload</h2><pre id="payload">${pretty(item.payload)}</pre>
<h2>Result</h2>${item.result === null ? html`<p class="muted">None.</p>` : html`<pre id="result">${pretty(item.result)}</pre>`}
<h2>Attempts' errors</h2>${item.errors.length === 0 ? html`<p class="muted">None.</p>` : html`<table id="errors">
<thead><tr><th class="n">attempt</th><th>at (UTC)</th><th>worker</th><th>error</th></tr></thead>
<tbody>${
    item.errors.map((e) => html`<tr><td class="n">${e.attempt}</td><td>${time(e.at)}</td><td>${e.worker ?? ""}</td><td><pre>${e.error}</pre></td></tr>`)
  }</tbody></table>`}
<h2>Timeline</h2><table id="timeline"><tbody>${
    timeline.sort((a, b) => a[0] - b[0]).map(([at, what, worker]) =>
      html`<tr><td>${time(at)}</td><td>${what}</td><td>${worker ?? ""}</td></tr>`
    )
  }</tbody></table>
</div>`)
}

// A kind's perGroup as words: what is not the default, and who set the limits.
const perGroupCell = (p: PerGroupInfo | null): string =>
  p === null ? "-" : [
    p.concurrency === null ? "" : `${p.concurrency} at once`,
    p.ordered ? "ordered" : "",
    p.rate === null ? "" : `${p.rate.limit} per ${age(p.rate.periodMs)}`,
    p.onFailure === "continue" ? "on failure: continue" : "",
    p.onDead === "hold" ? "a dead item holds its group" : ""
  ].filter((part) => part !== "").join(", ") + ` (${p.setBy})`

/** The kinds: counts, controls (global and per group), and (with a session) pause, resume and limits. */
export const kindsPage = (view: View, kinds: ReadonlyArray<KindInfo>): Html =>
  page(view, "Kinds", html`<h1>Kinds</h1>
<div id="live-kinds"${canAct(view) ? "" : html` data-live`}>
${kinds.length === 0 ? html`<p class="muted">No kinds yet.</p>` : html`<table id="kinds">
<thead><tr><th>kind</th><th>paused</th><th class="n">concurrency</th><th>rate</th><th>set by</th><th>per group</th><th class="n">paused groups</th><th class="n">waiting</th><th class="n">running</th><th class="n">dead</th>${
    canAct(view) ? html`<th>actions</th>` : ""
  }</tr></thead>
<tbody>${
    kinds.map((k) =>
      html`<tr><td>${kindLink(view, k.kind)} <a class="muted" href="${link(view, `/kinds/${encodeURIComponent(k.kind)}/groups`)}">groups</a></td><td>${k.paused ? html`<span class="warn">paused</span>` : "-"}</td><td class="n">${
        k.concurrency ?? "-"
      }</td><td>${k.rate === null ? "-" : `${k.rate.limit} per ${age(k.rate.periodMs)}`}</td><td>${
        k.concurrency === null && k.rate === null ? "-" : k.limitsSetBy
      }</td><td class="per-group">${perGroupCell(k.perGroup)}</td><td class="n">${
        k.pausedGroups === 0 ? "0" : html`<span class="warn">${k.pausedGroups}</span>`
      }</td><td class="n">${k.counts.waiting + k.counts.expired}</td><td class="n">${k.counts.running}</td><td class="n">${k.counts.dead}</td>${
        canAct(view) ? html`<td>${kindActions(view, k)}</td>` : ""
      }</tr>`
    )
  }</tbody></table>`}
</div>`)

const kindActions = (view: View, k: KindInfo): Html => {
  const path = `/kinds/${encodeURIComponent(k.kind)}`
  return html`${k.paused ? actionForm(view, `${path}/resume`, "Resume") : actionForm(view, `${path}/pause`, "Pause", { danger: true })}${
    actionForm(view, `${path}/limits`, "Set limits", {
      fields: html`<input name="concurrency" size="6" placeholder="concurrency" value="${k.concurrency ?? ""}"> <input name="rate" size="8" placeholder="rate 100/1m" value="${
        k.rate === null ? "" : `${k.rate.limit}/${periodText(k.rate.periodMs)}`
      }"> `
    })
  }`
}

/** The recurring schedules: next and last tick, the last tick's item, live or stopped. */
export const recurringPage = (view: View, schedules: ReadonlyArray<ScheduleInfo>): Html =>
  page(view, "Recurring", html`<h1>Recurring schedules</h1>
<div id="live-recurring" data-live>
${schedules.length === 0 ? html`<p class="muted">No recurring schedules.</p>` : html`<table id="recurring">
<thead><tr><th>name</th><th>kind</th><th>cron</th><th>zone</th><th>next tick (UTC)</th><th>last tick (UTC)</th><th>last item</th><th>status</th>${
    canAct(view) ? html`<th></th>` : ""
  }</tr></thead>
<tbody>${
    schedules.map((s) =>
      html`<tr><td>${s.name}</td><td>${kindLink(view, s.kind)}</td><td><code>${s.cron}</code></td><td>${s.tz ?? "UTC"}</td><td>${time(s.nextTick)}</td><td>${
        time(s.lastTick)
      }</td><td>${
        s.lastItem === null ? "-" : html`<a href="${view.base}/items/${s.lastItem.id}">${s.lastItem.id}</a> ${s.lastItem.state ?? "pruned"}`
      }</td><td>${s.status === "live" ? html`<span class="good">live</span>` : html`<span class="warn">stopped</span> (${age(s.declaredAgeMs)})`}</td>${
        canAct(view) ? html`<td>${actionForm(view, `/recurring/${encodeURIComponent(s.name)}/run`, "Run now")}</td>` : ""
      }</tr>`
    )
  }</tbody></table>`}
</div>`)

const workerTable = (view: View, workers: ReadonlyArray<WorkerInfo>): Html =>
  html`<table id="workers">
<thead><tr><th>name</th><th>host</th><th class="n">pid</th><th>kinds</th><th class="n">running</th><th class="n">concurrency</th><th>heartbeat age</th><th>status</th><th>version</th></tr></thead>
<tbody>${
    workers.map((w) =>
      html`<tr><td>${w.name}</td><td>${w.host}</td><td class="n">${w.pid}</td><td>${
        w.kinds === null ? html`<span class="muted">every kind</span>` : w.kinds.map((k, i) => html`${i === 0 ? "" : ", "}${kindLink(view, k)}`)
      }</td><td class="n">${w.running}</td><td class="n">${w.concurrency}</td><td>${age(w.heartbeatAgeMs)}</td><td>${
        w.status === "live" ? html`<span class="good">live</span>` : html`<span class="bad">gone</span>`
      }</td><td>${w.version}</td></tr>`
    )
  }</tbody></table>`

/** The worker pools, live and gone. */
export const workersPage = (view: View, workers: ReadonlyArray<WorkerInfo>): Html =>
  page(
    view,
    "Workers",
    html`<h1>Workers</h1><div id="live-workers" data-live>${
      workers.length === 0 ? html`<p class="muted">No worker pool has registered.</p>` : workerTable(view, workers)
    }</div>`
  )

const BULK: ReadonlyArray<readonly [BulkAction, string]> = [
  ["retry", "Retry the dead…"],
  ["run-now", "Run the scheduled now…"],
  ["cancel", "Cancel the waiting and running…"],
  ["delete", "Delete the dead…"]
]

// The filter as hidden fields of a bulk action's form.
const filterFields = (filter: ItemFilter): Html =>
  html`${
    (["state", "kind", "key", "q"] as const).map((name) =>
      filter[name] === undefined ? "" : html`<input type="hidden" name="${name}" value="${filter[name]}">`
    )
  }`

const describeFilter = (filter: ItemFilter): string => {
  const parts = (["state", "kind", "key", "q"] as const).flatMap((name) => (filter[name] === undefined ? [] : [`${name} = ${filter[name]}`]))
  return parts.length === 0 ? "every item" : parts.join(", ")
}

// A bulk action's words on its confirmation.
const CONFIRM: Record<BulkAction, { readonly verb: string; readonly what: string }> = {
  retry: { verb: "retry", what: "dead" },
  cancel: { verb: "cancel", what: "waiting or running" },
  delete: { verb: "delete", what: "dead" },
  "run-now": { verb: "run now", what: "scheduled" }
}

/** The confirmation of a bulk action: how many items it would change, and the button that does it. */
/**
 * Asks to confirm a bulk action on the items a filter matches now. The form
 * carries the id under which the dashboard keeps those items (`key`): the
 * confirmed post acts on them, not on what matches by then. `again`: a
 * confirmation came back unknown or expired, so this asks anew.
 */
export const confirmBulkPage = (view: View, filter: ItemFilter, action: BulkAction, matched: Matched, key: string, again = false): Html => {
  const { verb, what } = CONFIRM[action]
  return page(view, "Confirm", html`<h1>${verb[0].toUpperCase() + verb.slice(1)} ${matched.ids.length} ${what} items?</h1>
${again ? html`<p class="badge bad" id="notice">That confirmation is unknown here or expired; nothing was done. Confirm again.</p>` : ""}
<p>Filter: ${describeFilter(filter)}.${matched.more ? html` <strong>More items may match</strong>: one action takes the newest ${matched.ids.length}.` : ""}</p>
${
    matched.ids.length === 0
      ? html`<p class="muted">Nothing to do.</p>`
      : html`<div id="confirm">${
        actionForm(view, `/items/bulk/${action}`, `Yes, ${verb} ${matched.ids.length} items`, {
          danger: action === "cancel" || action === "delete",
          fields: html`${filterFields(filter)}<input type="hidden" name="confirm" value="${key}">`
        })
      }</div>`
  }
<p><a href="${link(view, "/items", { state: filter.state, kind: filter.kind, key: filter.key, q: filter.q })}">Back to the list</a></p>`)
}
