/**
 * PostgreSQL only: the grouped claim stays a seek with a backlog (issue 36,
 * "W6-sized backlog": 1,000,000 waiting items in 100,000 groups, measured in
 * bench/groups.ts G6). Here 20,000 due items in 2,000 ordered groups, so the
 * test runs in a second: every statement the claim runs (the walk over the
 * groups and each group's head, inside docket_claim_groups, a PL/pgSQL
 * function) is seen through auto_explain, whose plans of nested statements
 * come to this session as notices, and none of them reads docket_items
 * whole (no Seq Scan on it), in the first five executions (planned each time)
 * nor after (PL/pgSQL's generic plans). And the general walk that follows
 * the grouped claim reads none of the grouped items (migration 0020).
 * Registered at the top level of test/store/pgOnly.test.ts.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import pg from "pg"
import * as Docket from "../../../src/Docket.js"
import * as QueueRepo from "../../../src/QueueRepo.js"
import { freshPgDatabase, pgAvailable } from "../../support/db.js"

const cleanups: Array<() => Promise<void>> = []

// A fresh database whose kind "seq" is a sequence (one at a time, ordered),
// and a client of it.
const sequencesClient = async () => {
  const db = await freshPgDatabase()
  cleanups.push(db.drop)
  const runtime = ManagedRuntime.make(Docket.layerClient(db.url))
  cleanups.push(() => runtime.dispose())
  await runtime.runPromise(
    Effect.flatMap(QueueRepo.QueueRepo, (repo) => repo.declarePerGroup("seq", { concurrency: 1, ordered: true }))
  )
  const client = new pg.Client({ connectionString: db.url })
  await client.connect()
  cleanups.push(() => client.end())
  return client
}

// 20,000 items due in 2,000 groups of "seq", item n in group n % 2000: a
// group's ten items are 2,000 ids apart, as interleaved enqueues leave them.
const sequenceBacklog = async (client: pg.Client) => {
  await client.query(`
    INSERT INTO docket_items (kind, payload, group_key, run_at, created_at, updated_at)
    SELECT 'seq', '{}', 'g' || (n % 2000), docket_now_ms() - 1000, docket_now_ms(), docket_now_ms()
    FROM generate_series(0, 19999) n ORDER BY n`)
  await client.query("VACUUM ANALYZE docket_items")
}

// From now on, the plan of every statement the client runs, nested ones too
// (a PL/pgSQL function's), comes to it as a notice, kept in the array returned.
const explainNested = async (client: pg.Client) => {
  const notices: Array<string> = []
  client.on("notice", (notice) => notices.push(notice.message ?? ""))
  await client.query("LOAD 'auto_explain'")
  for (const set of [
    "auto_explain.log_min_duration = 0",
    "auto_explain.log_nested_statements = on",
    "auto_explain.log_level = notice"
  ]) await client.query(`SET ${set}`)
  return notices
}

export const pgGroupPlanTests = () => {
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c()
  })

  describe.skipIf(!pgAvailable)("the grouped claim with a backlog (PostgreSQL)", () => {
    it("claims one head per group and reads docket_items only through indexes (20,000 items, 2,000 groups)", async () => {
      const client = await sequencesClient()
      await sequenceBacklog(client)

      const notices = await explainNested(client)

      const claimed: Array<{ id: string; group_key: string }> = []
      for (let n = 0; n < 8; n++) {
        const { rows } = await client.query<{ id: string; group_key: string }>(
          `SELECT (item).id AS id, (item).group_key AS group_key
           FROM docket_claim_next('w', 10, 60000, NULL, 10, NULL, NULL, NULL, NULL) WHERE (item).id IS NOT NULL`
        )
        claimed.push(...rows)
      }
      // Eight claims of 10: 80 groups' heads (each group's smallest id), one item per group.
      expect(claimed).toHaveLength(80)
      expect(new Set(claimed.map((r) => r.group_key)).size).toBe(80)
      for (const row of claimed) expect(Number(row.id) <= 2000).toBe(true)

      const plans = notices.filter((n) => /Query Text/.test(n) && /docket_items/.test(n))
      // The control: the group walk's own statements were seen (they name the group index).
      expect(plans.some((p) => /docket_items_group/.test(p)), notices.join("\n---\n")).toBe(true)
      const scans = plans.filter((p) => /Seq Scan on docket_items\b/.test(p))
      expect(scans, scans.join("\n---\n")).toEqual([])
    })

    // migrations/pg/0021_grouped_claim_set.sql: the grouped claim walks a
    // pass's groups in one statement. Before it, each group looked at cost
    // its own statements (the next group, its live leases, its head read and
    // then locked): a claim of 100 ran about 500 more than a claim of 10.
    // migrations/pg/0022_grouped_claim_chunks.sql: a sequence's walk finds the
    // next groups from one read of up to 64 entries of the group index, not a
    // seek (a landing on a page of the index) per group: 0021 started 101
    // scans of it for a claim of 100. Counted from auto_explain's plans of the
    // nested statements, and what the claim starts and reads in the group
    // index from the transaction's own counts; not timed (bench/groups.ts G6 times it).
    it("claims many groups' heads in one statement: the statements do not grow with the batch, the group index is landed on once per several groups", async () => {
      const client = await sequencesClient()
      await sequenceBacklog(client)
      const notices = await explainNested(client)

      // One claim of `n` (all of it the grouped kind's), in a transaction of
      // its own: its items, its statements, and the group index entries read.
      const claimOf = async (n: number) => {
        await client.query("BEGIN")
        const before = notices.length
        const { rows } = await client.query<{ id: string; group_key: string }>(
          `SELECT (item).id AS id, (item).group_key AS group_key
           FROM docket_claim_next('w', $1, 60000, NULL, $1, NULL, NULL, NULL, NULL) WHERE (item).id IS NOT NULL`,
          [n]
        )
        const statements = notices.length - before
        const { rows: [{ read, scans }] } = await client.query<{ read: string; scans: string }>(
          `SELECT pg_stat_get_xact_tuples_returned('docket_items_group'::regclass) AS read,
             pg_stat_get_xact_numscans('docket_items_group'::regclass) AS scans`
        )
        await client.query("COMMIT")
        return { rows, statements, read: Number(read), scans: Number(scans) }
      }
      const small = await claimOf(10)
      const big = await claimOf(100)
      expect(small.rows).toHaveLength(10)
      expect(big.rows).toHaveLength(100)
      // Each of its own group, the group's head (its smallest id), round-robin
      // on from where the first claim stopped.
      const groups = [...small.rows, ...big.rows].map((r) => r.group_key)
      expect(new Set(groups).size).toBe(110)
      for (const row of big.rows) expect(Number(row.id) < 2000).toBe(true)
      // The same statements for 100 items as for 10 (the function's own and
      // the claim's: settings, one walk, the lease, the cursor, the ungrouped items).
      expect(big.statements, notices.slice(-big.statements).join("\n---\n").slice(0, 4000)).toBe(small.statements)
      // The group index: each read of it lands once and reads on up to 64
      // entries (each group's ten here, so about six groups a read): 21 scans
      // for these 100 groups, where 0021 sought each group (114 scans).
      expect(big.scans, JSON.stringify({ small, big: { ...big, rows: big.rows.length } })).toBeLessThanOrEqual(100 / 4)
      expect(big.read).toBeLessThanOrEqual(64 * big.scans)
      const scans = notices.filter((p) => /Seq Scan on docket_items\b/.test(p))
      expect(scans, scans.join("\n---\n")).toEqual([])
    })

    // migrations/pg/0020_grouped_claim.sql: the general walk after the grouped
    // claim reads only ungrouped items. Before it, a claim asking for more
    // than the grouped kinds' share read past every waiting grouped item in
    // docket_items_claim (about 40,000 entries here; at 1,000,000 items in
    // 100,000 groups, 244 ms a claim). Read from the claim's own count of the
    // entries it read in the claim and lease indexes, not timed.
    it("a claim asking for more than the grouped kinds' share reads a few claim-index entries, not the grouped backlog", async () => {
      const client = await sequencesClient()
      // 20,000 items in 2,000 ordered groups ("seq"), then 20,000 in 2,000
      // groups of a kind without perGroup ("tagged"), all due before the 5
      // ungrouped ones: the general walk used to read the first 20,000 to skip them.
      await client.query(`
        INSERT INTO docket_items (kind, payload, group_key, run_at, created_at, updated_at)
        SELECT k, '{}', 'g' || (n % 2000), docket_now_ms() - CASE k WHEN 'seq' THEN 2000 ELSE 1000 END,
          docket_now_ms(), docket_now_ms()
        FROM generate_series(0, 19999) n, unnest(ARRAY['seq', 'tagged']) k ORDER BY k, n`)
      await client.query(`
        INSERT INTO docket_items (kind, payload, run_at, created_at, updated_at)
        SELECT 'plain', '{}', docket_now_ms() - 500, docket_now_ms(), docket_now_ms() FROM generate_series(1, 5)`)
      await client.query("VACUUM ANALYZE docket_items")

      const notices = await explainNested(client)

      // A pool's claim: 30 asked, at most 10 of controlled kinds (its free slots).
      const claimOnce = async () => {
        const { rows } = await client.query<{ id: string | null; kind: string | null; group_key: string | null; entries_read: string | null }>(
          `SELECT (item).id AS id, (item).kind AS kind, (item).group_key AS group_key, entries_read
           FROM docket_claim_next('w', 30, 60000, NULL, 10, NULL, NULL, NULL, NULL)`
        )
        return { items: rows.filter((r) => r.id !== null), read: Number(rows.find((r) => r.id === null)?.entries_read) }
      }
      const first = await claimOnce()
      // The walk read the 5 ungrouped entries and a few more (the priorities'
      // seeks), none of the 40,000 grouped ones.
      expect(first.read).toBeLessThan(50)
      // 10 in the controlled kinds' share, the 5 ungrouped items, and 15 more
      // grouped ones prefetched with the rest of the batch (neither grouped
      // kind has a limit on the kind as a whole): each of its own group.
      expect(first.items.filter((r) => r.kind === "plain")).toHaveLength(5)
      const grouped = first.items.filter((r) => r.group_key !== null)
      expect(grouped).toHaveLength(25)
      expect(new Set(grouped.map((r) => `${r.kind}/${r.group_key}`)).size).toBe(25)
      // And again with nothing ungrouped left: the walk reads next to nothing.
      for (let n = 0; n < 3; n++) {
        const again = await claimOnce()
        expect(again.items.filter((r) => r.group_key !== null)).toHaveLength(30)
        expect(again.read).toBeLessThan(50)
      }
      const plans = notices.filter((n) => /Query Text/.test(n) && /docket_items/.test(n))
      const scans = plans.filter((p) => /Seq Scan on docket_items\b/.test(p))
      expect(scans, scans.join("\n---\n")).toEqual([])
    })
  })
}
