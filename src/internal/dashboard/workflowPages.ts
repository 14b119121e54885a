/**
 * The workflows' pages: the executions (a GET form filters them by state and
 * workflow) and one execution (what `docket workflow show` prints: payload,
 * result, activities with attempts and results, deferreds, durable clocks,
 * children), with interrupt and resume for a session that may act. Every
 * stored string goes through the escaping template (html.ts).
 */
import type { Execution, ExecutionDetail } from "../workflow/admin.js"
import { type Html, html, pretty } from "./html.js"
import { actionForm, canAct, link, page, time, type View } from "./layout.js"
import type { Before } from "../workflow/cursor.js"
import type { ExecutionState } from "../workflow/sql.js"

const STATES = ["running", "suspended", "complete"] as const

/** What the executions' list shows (workflows.ts reads it from the query). */
export interface WorkflowFilter {
  readonly state?: ExecutionState | undefined
  readonly workflow?: string | undefined
  readonly limit: number
  /** Below this execution (the `cursor=` of the previous page). */
  readonly before?: Before | undefined
}

// The notices a redirect may ask for: a fixed set (a link cannot make the page say what it likes).
const NOTICES: Readonly<Record<string, string>> = {
  interrupted: "Interrupted: its next run stops at its suspension point and runs its compensations.",
  resumed: "Resumed: another run replays it."
}

const stateCell = (state: string) => html`<span class="state-${state}">${state}</span>`

const executionLink = (view: View, id: string) => html`<a href="${link(view, `/workflows/${encodeURIComponent(id)}`)}">${id}</a>`

const executionRows = (view: View, executions: ReadonlyArray<Execution>): Html =>
  html`<table id="executions">
<thead><tr><th>execution</th><th>workflow</th><th>state</th><th class="n">runs</th><th>updated (UTC)</th><th>parent</th></tr></thead>
<tbody>${
    executions.map((e) =>
      html`<tr><td>${executionLink(view, e.executionId)}</td><td><a href="${link(view, "/workflows", { workflow: e.workflow })}">${e.workflow}</a></td><td>${
        stateCell(e.state)
      }</td><td class="n">${e.runs}</td><td>${time(e.updatedAt)}</td><td>${e.parent === null ? "-" : executionLink(view, e.parent)}</td></tr>`
    )
  }</tbody></table>`

/** The executions a filter matches, newest change first. */
export const listPage = (
  view: View,
  filter: WorkflowFilter,
  executions: ReadonlyArray<Execution>,
  cursor: string | null
): Html =>
  page(view, "Workflows", html`<h1>Workflows</h1>
<form class="filters" method="get" action="${view.base}/workflows"><label>state <select name="state"><option value="">any</option>${
    STATES.map((s) => html`<option value="${s}"${filter.state === s ? html` selected` : ""}>${s}</option>`)
  }</select></label> <label>workflow <input name="workflow" value="${filter.workflow ?? ""}"></label> <button type="submit">Filter</button></form>
<div id="live-workflows" data-live>
${
    executions.length === 0
      ? html`<p class="muted">No workflow executions${filter.state === undefined && filter.workflow === undefined ? "" : " match"}.</p>`
      : html`${executionRows(view, executions)}${
        cursor === null ? "" : html`<p class="pager"><a rel="next" href="${
          link(view, "/workflows", { state: filter.state, workflow: filter.workflow, limit: filter.limit === 50 ? undefined : String(filter.limit), cursor })
        }">next page</a></p>`
      }`
  }
</div>`)

const section = <A>(title: string, rows: ReadonlyArray<A>, head: Html, row: (a: A) => Html): Html =>
  html`<h2>${title}</h2>${rows.length === 0 ? html`<p class="muted">None.</p>` : html`<table><thead>${head}</thead><tbody>${rows.map(row)}</tbody></table>`}`

const actions = (view: View, d: ExecutionDetail): Html => {
  if (!canAct(view) || d.state === "complete") return html``
  const path = `/workflows/${encodeURIComponent(d.executionId)}`
  // A div, as the item page's: a <p> cannot hold a <form> (the parser closes
  // it first), so the buttons ended up outside #actions (found in Chromium).
  return html`<div id="actions">${actionForm(view, `${path}/interrupt`, "Interrupt", { danger: true })}${
    d.state === "suspended" ? actionForm(view, `${path}/resume`, "Resume") : ""
  }</div>`
}

/** One execution: its fields, payload and result, activities, deferreds, clocks and children; its actions. */
export const executionPage = (view: View, d: ExecutionDetail, done: string | null): Html => {
  const notice = done !== null && Object.hasOwn(NOTICES, done) ? NOTICES[done] : null
  return page(view, `Workflow ${d.executionId}`, html`<h1>${d.workflow} <span class="muted">${d.executionId}</span></h1>
${notice === null ? "" : html`<p class="badge good" id="notice">${notice}</p>`}
<div id="live-workflow"${canAct(view) ? "" : html` data-live`}>
<table id="fields"><tbody>
<tr><th>state</th><td>${stateCell(d.state)}</td></tr>
<tr><th>runs</th><td>${d.runs}</td></tr>
<tr><th>parent</th><td>${d.parent === null ? "-" : executionLink(view, d.parent)}</td></tr>
<tr><th>created</th><td>${time(d.createdAt)}</td></tr>
<tr><th>updated</th><td>${time(d.updatedAt)}</td></tr>
<tr><th>completed</th><td>${time(d.completedAt)}</td></tr>
</tbody></table>
${actions(view, d)}
<h2>Payload</h2><pre id="payload">${pretty(d.payload)}</pre>
<h2>Result</h2>${d.result === null ? html`<p class="muted">Not complete.</p>` : html`<pre id="result">${pretty(d.result)}</pre>`}
${
    section("Activities", d.activities, html`<tr><th>activity</th><th class="n">attempt</th><th>at (UTC)</th><th>result</th></tr>`, (a) =>
      html`<tr><td>${a.name}</td><td class="n">${a.attempt}</td><td>${time(a.at)}</td><td><pre>${pretty(a.result)}</pre></td></tr>`)
  }
${
    section("Deferreds", d.deferreds, html`<tr><th>deferred</th><th>at (UTC)</th><th>exit</th></tr>`, (x) =>
      html`<tr><td>${x.name}</td><td>${time(x.at)}</td><td><pre>${pretty(x.exit)}</pre></td></tr>`)
  }
${section("Clocks", d.clocks, html`<tr><th>clock</th><th>due (UTC)</th></tr>`, (c) => html`<tr><td>${c.name}</td><td>${time(c.dueAt)}</td></tr>`)}
${
    section("Children", d.children, html`<tr><th>execution</th><th>workflow</th><th>state</th></tr>`, (c) =>
      html`<tr><td>${executionLink(view, c.executionId)}</td><td>${c.workflow}</td><td>${stateCell(c.state)}</td></tr>`)
  }
</div>`)
}
