/**
 * Groups on the dashboard (issue 36: actors): a kind's groups with
 * unfinished items, a page at a time in group order (`QueueRepo.listGroups`,
 * a seek from the cursor whatever the number of groups), the groups a
 * failure holds marked; and on an item's page, its group and what it waits
 * behind. Why not "the busiest groups first": ranking a kind's groups by
 * their backlog reads every unfinished item of the kind (a million groups, a
 * million rows); the page in group order reads only its own groups.
 */
import type { GroupInfo, GroupPage, Item } from "../../Domain.js"
import { type Html, html } from "./html.js"
import { age, link, page, type View } from "./layout.js"

const headText = (g: GroupInfo, now: number): string => {
  const { attempts, id, runAt, state } = g.head
  if (state === "running") return `#${id} running (attempt ${attempts})`
  const when = runAt > now ? `due in ${age(runAt - now)}` : "due"
  return attempts > 0 ? `#${id} ${when}, retry after ${attempts} attempt${attempts === 1 ? "" : "s"}` : `#${id} ${when}`
}

/** A kind's groups: a page of them, blocked ones marked, the next page's link. */
export const groupsPage = (view: View, kind: string, groups: GroupPage, now: number): Html =>
  page(view, `Groups of ${kind}`, html`<h1>Groups of ${kind}</h1>
<p class="muted">Groups with unfinished items, in group order. Held by a failure: an ordered group whose first item waits for its retry.</p>
<div id="live-groups" data-live>
${groups.groups.length === 0 ? html`<p class="muted">No groups with unfinished items.</p>` : html`<table id="groups">
<thead><tr><th>group</th><th class="n">due</th><th class="n">scheduled</th><th class="n">running</th><th class="n">retrying</th><th>first item</th><th>held by a failure</th></tr></thead>
<tbody>${
    groups.groups.map((g) =>
      html`<tr${g.blocked ? html` class="blocked"` : ""}><td>${g.group}</td><td class="n">${g.counts.due}</td><td class="n">${g.counts.scheduled}</td><td class="n">${g.counts.running}</td><td class="n">${g.counts.retrying}</td><td><a href="${
        link(view, `/items/${g.head.id}`, {})
      }">${headText(g, now)}</a></td><td>${g.blocked ? html`<span class="warn">yes</span>: ${g.head.lastError ?? "failed"}` : "-"}</td></tr>`
    )
  }</tbody></table>`}
<p>${
    groups.cursor === null
      ? html`<span class="muted">End of the list.</span>`
      : html`<a rel="next" href="${link(view, `/kinds/${encodeURIComponent(kind)}/groups`, { cursor: groups.cursor })}">Next page</a>`
  }</p>
</div>`)

/**
 * An item's group as its page shows it: the group (a link to its kind's
 * groups from there) and, for a waiting item that is not its group's first,
 * what it waits behind.
 */
export const groupCell = (view: View, item: Item, group: GroupInfo | undefined): Html => {
  if (item.group === null) return html`<span class="muted">none</span>`
  const name = html`<a href="${link(view, `/kinds/${encodeURIComponent(item.kind)}/groups`, {})}">${item.group}</a>`
  if (group === undefined || !group.ordered || item.state !== "waiting" || group.head.id === item.id) return name
  const why = group.blocked ? `, which waits for its retry` : group.head.state === "running" ? ", which is running" : ""
  return html`${name}: behind item <a href="${link(view, `/items/${group.head.id}`, {})}">${group.head.id}</a> of group ${item.group}${why}`
}
