/**
 * Every example runs by itself to exit 0 and prints what it promises (each
 * as `npx tsx examples/<name>.ts` would: node with tsx's loader).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { runNode } from "./support/cli.js"
import { freshPgDatabase, pgAvailable } from "./support/db.js"

// Each example as `npx tsx examples/<name>.ts` runs it: node with tsx's loader.
// DOCKET_DATABASE_URL is passed only when a test gives one.
const runExample = (name: string, env: Record<string, string> = {}) =>
  runNode(["--import", "tsx", join("examples", `${name}.ts`)], { env, timeoutMs: 60_000 })

/** Asserts the lines appear in this order (other lines may come between). */
const inOrder = (text: string, patterns: ReadonlyArray<RegExp | string>) => {
  let at = 0
  for (const pattern of patterns) {
    const rest = text.slice(at)
    const match = typeof pattern === "string"
      ? (rest.indexOf(pattern) >= 0 ? { index: rest.indexOf(pattern), length: pattern.length } : null)
      : (() => {
        const m = pattern.exec(rest)
        return m === null ? null : { index: m.index, length: m[0].length }
      })()
    expect(match, `${String(pattern)} after position ${at} in:\n${text}`).not.toBeNull()
    at += match!.index + match!.length
  }
}

/** The example's table (if it is still there) and the queue's items, as left in a database. */
const leftBehind = async (url: string) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const table = await client.query(`SELECT to_regclass('docket_example_orders')::text AS name`)
    const items = await client.query(`SELECT kind, state, attempts FROM docket_items_all ORDER BY id`)
    return { table: table.rows[0].name as string | null, items: items.rows }
  } finally {
    await client.end()
  }
}

/**
 * A real OTLP/HTTP receiver on loopback: accepts POST /v1/traces and
 * /v1/metrics (JSON, what the -otlp-http exporters send) and keeps each body.
 */
const otlpReceiver = async () => {
  const received: Array<{ readonly path: string; readonly contentType: string; readonly body: any }> = []
  const server = createServer((req, res) => {
    let text = ""
    req.setEncoding("utf8").on("data", (chunk: string) => (text += chunk)).on("end", () => {
      const ok = req.method === "POST" && (req.url === "/v1/traces" || req.url === "/v1/metrics")
      if (ok) received.push({ path: req.url!, contentType: String(req.headers["content-type"]), body: JSON.parse(text) })
      res.writeHead(ok ? 200 : 404, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

interface OtlpSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly links?: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
}

describe.concurrent("examples", () => {
  it("quickstart.ts", async () => {
    const r = await runExample("quickstart")
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain("resized cat.png to 200px (item 1, attempt 1)")
    expect(r.stdout).toContain("resized dog.png to 640px (item 2, attempt 1)")
    inOrder(r.stdout, [
      "image.resize #3 failed (Retry: not enough memory right now); retrying",
      "resized panorama.png to 4000px (item 3, attempt 2)",
      "all 3 images resized; queue: due 0, scheduled 0, dead 0"
    ])
  })

  it("mail.ts", async () => {
    const r = await runExample("mail")
    expect(r.code, r.stderr).toBe(0)
    inOrder(r.stdout, [
      /mail server on 127\.0\.0\.1:\d+ \(refuses the first 2 deliveries: ada's and grace's mailboxes are busy\)/,
      /ada@example\.com: delivery failed \(Error: Message failed: 451 mailbox busy, try again later\); queued as item 1 for retry/,
      /grace@example\.com: delivery failed \(.*451.*\); queued as item 2 for retry/
    ])
    expect(r.stdout).toContain("alan@example.com: delivered at once")
    expect(r.stdout).toMatch(/ada@example\.com: delivered by the worker \(item 1, attempt 1\)/)
    expect(r.stdout).toMatch(/grace@example\.com: delivered by the worker \(item 2, attempt 1\)/)
    inOrder(r.stdout, ["the mail server received 3 messages:"])
    for (const name of ["Ada", "Grace", "Alan"]) {
      expect(r.stdout).toContain(`  to ${name.toLowerCase()}@example.com: Welcome, ${name}!`)
    }
  })

  it("git-mirror.ts", async () => {
    const r = await runExample("git-mirror")
    expect(r.code, r.stderr).toBe(0)
    const second = /push of (\w+) while refresh #1 runs/.exec(r.stdout)?.[1]
    expect(second).toBeDefined()
    inOrder(r.stdout, [
      /repository app at \w+; its mirror does not exist yet/,
      "3 pushes to app: enqueued #1, deduplicated #1, deduplicated #1 (one refresh waits for all three)",
      /refresh #1 failed \(Retry: git push --mirror: fatal: .*app\.git' does not appear to be a git repository\); creating the mirror, retry follows/,
      /refresh #1 \(attempt \d\): mirror of app now at \w+/,
      /push of \w+ while refresh #1 runs: enqueued #(\d+) \(a new refresh, not merged into the running one\)/,
      new RegExp(`refresh #\\d+ \\(attempt 1\\): mirror of app now at ${second}`),
      `mirror of app at ${second}, the same as the repository: the push during the refresh was not lost`
    ])
  })

  it("webhooks.ts", async () => {
    const r = await runExample("webhooks")
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/delivered order\.paid to http:\/\/127\.0\.0\.1:\d+\/hooks\/ok \(item 1, attempt 1\)/)
    inOrder(r.stdout, [
      /retrying item 2: Retry: http:\/\/127\.0\.0\.1:\d+\/hooks\/flaky answered 500/,
      /retrying item 2: Retry: http:\/\/127\.0\.0\.1:\d+\/hooks\/flaky answered 500/,
      /delivered order\.paid to http:\/\/127\.0\.0\.1:\d+\/hooks\/flaky \(item 2, attempt 3\)/
    ])
    expect(r.stdout).toMatch(
      /item 3 is dead after attempt 1: Permanent: http:\/\/127\.0\.0\.1:\d+\/hooks\/gone answered 410 Gone: the subscription was removed/
    )
    expect(r.stdout).toContain(
      "done: 2 delivered, 1 dead (kept for inspection: /hooks/gone); queue: due 0, scheduled 0, dead 1"
    )
    const received = /requests received: (.*)$/m.exec(r.stdout)?.[1].split(", ").sort()
    expect(received).toEqual(["/hooks/flaky 3", "/hooks/gone 1", "/hooks/ok 1"])
  })

  it.skipIf(!pgAvailable)("transactional.ts (PostgreSQL, a fresh database)", async () => {
    const db = await freshPgDatabase()
    try {
      const r = await runExample("transactional", { DOCKET_DATABASE_URL: db.url })
      expect(r.code, r.stderr).toBe(0)
      inOrder(r.stdout, [
        "order 1 (Ada) and its receipt job 1 committed together",
        "order of Bob rolled back (payment declined): order 2 exists: false, its receipt job 2 exists: false",
        "in the end: 1 order, 0 jobs left in the queue"
      ])
      expect(r.stdout).toContain("receipt for order 1 sent to Ada: 42.00 EUR (item 1)")
      expect(r.stdout).not.toMatch(/receipt for order 2/)
      // What the example left in the database it was given: nothing of its own.
      expect(await leftBehind(db.url)).toEqual({ table: null, items: [] })
    } finally {
      await db.drop()
    }
  })

  it.skipIf(!pgAvailable)("transactional.ts pointed at a user's queue: touches none of its items, leaves nothing behind", async () => {
    const db = await freshPgDatabase()
    try {
      for (const payload of ['{"n":1}', '{"n":2}']) {
        const added = await runNode(["bin/docket.mjs", "enqueue", "user.report", payload, "--database", db.url])
        expect(added.code, added.stderr).toBe(0)
      }
      const r = await runExample("transactional", { DOCKET_DATABASE_URL: db.url })
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout).toContain("in the end: 1 order, 0 jobs left in the queue")
      expect(await leftBehind(db.url)).toEqual({
        table: null,
        items: [{ kind: "user.report", state: "waiting", attempts: 0 }, { kind: "user.report", state: "waiting", attempts: 0 }]
      })
    } finally {
      await db.drop()
    }
  })

  it("otel.ts: spans and metrics reach a real OTLP/HTTP receiver; each run's span links to its enqueue's", async () => {
    const receiver = await otlpReceiver()
    const dir = mkdtempSync(join(tmpdir(), "docket-otel-test-"))
    try {
      const r = await runExample("otel", {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        DOCKET_DATABASE_URL: join(dir, "queue.db")
      })
      expect(r.code, r.stderr).toBe(0)
      const sent = [...r.stdout.matchAll(/welcome mail sent to (\S+) \(item (\d+), trace ([0-9a-f]{32})\)/g)]
      expect(sent.map((m) => m[1]).sort()).toEqual(["ada@example.com", "grace@example.com"])
      expect(r.stdout).toContain(`traces and metrics exported to ${receiver.endpoint} (flushed at shutdown)`)

      for (const { contentType } of receiver.received) expect(contentType).toMatch(/^application\/json/)
      const spans: Array<OtlpSpan> = receiver.received.filter((b) => b.path === "/v1/traces").flatMap((b) =>
        b.body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans))
      )
      const named = (name: string) => spans.filter((s) => s.name === name)
      const requests = named("POST /signup")
      const enqueues = named("docket.enqueue")
      const runs = named("docket.item")
      expect([requests.length, enqueues.length, runs.length]).toEqual([2, 2, 2])
      // request -> enqueue: a child in the request's trace.
      for (const enqueue of enqueues) {
        const request = requests.find((q) => q.spanId === enqueue.parentSpanId)
        expect(request?.traceId).toBe(enqueue.traceId)
      }
      // enqueue -> run: each run's span links to one enqueue's span context.
      const linkedTo = runs.map((run) => {
        expect(run.links).toHaveLength(1)
        const link = run.links![0]
        const enqueue = enqueues.find((e) => e.traceId === link.traceId && e.spanId === link.spanId)
        expect(enqueue, `the link of ${run.spanId}`).toBeDefined()
        return enqueue!.spanId
      })
      expect(new Set(linkedTo).size).toBe(2)
      // The handler's own span is a child of the run's; the printed trace is the run's.
      for (const smtp of named("smtp.send")) expect(runs.map((x) => x.spanId)).toContain(smtp.parentSpanId)
      expect(sent.map((m) => m[3]).sort()).toEqual(runs.map((x) => x.traceId).sort())

      const metrics: Array<string> = receiver.received.filter((b) => b.path === "/v1/metrics").flatMap((b) =>
        b.body.resourceMetrics.flatMap((rm: any) => rm.scopeMetrics.flatMap((sm: any) => sm.metrics.map((m: any) => m.name)))
      )
      expect(metrics).toEqual(expect.arrayContaining(["docket_items_claimed", "docket_items_completed", "docket_item_duration_ms"]))
    } finally {
      rmSync(dir, { recursive: true, force: true })
      await receiver.close()
    }
  })

  it("app-layer.ts", async () => {
    const r = await runExample("app-layer")
    expect(r.code, r.stderr).toBe(0)
    inOrder(r.stdout, [
      /listening on http:\/\/127\.0\.0\.1:\d+/,
      `POST /signup {"email":"ada@example.com","name":"Ada"} -> 202 {"id":1,"deduplicated":false}`,
      `POST /signup {"email":"ada@example.com","name":"Ada"} -> 202 {"id":1,"deduplicated":true}`,
      /POST \/signup \{"email":"grace@example\.com","name":"Grace"\} -> 202 \{"id":\d+,"deduplicated":false\}/,
      `POST /signup {"email":"not an address","name":"?"} -> 400 {"error":"expected {email, name}"}`
    ])
    expect(r.stdout).toContain("worker: welcome mail sent to Ada <ada@example.com> (item 1)")
    expect(r.stdout).toMatch(/worker: welcome mail sent to Grace <grace@example\.com> \(item \d+\)/)
    expect(r.stdout.match(/welcome mail sent/g)).toHaveLength(2)
    inOrder(r.stdout, ["2 welcome mails sent; shutting down", "stopped: HTTP server closed, worker pool shut down"])
  })

  it("workflow-signup.ts: a saga whose failed step compensates the one before it", async () => {
    const r = await runExample("workflow-signup")
    expect(r.code, r.stderr).toBe(0)
    inOrder(r.stdout, [
      "signup ada@example.com",
      `service: POST /charges {"email":"ada@example.com","plan":"pro"}`,
      `service: POST /accounts {"email":"ada@example.com"}`,
      `service: POST /mail {"to":"ada@example.com","template":"welcome"}`,
      "signed up ada@example.com: accounts-1, charged charges-1",
      "signup taken@example.com",
      `service: POST /charges {"email":"taken@example.com","plan":"pro"}`,
      `service: POST /accounts {"email":"taken@example.com"} -> 409`,
      `service: POST /refunds {"charge":"charges-1"}`,
      "signup failed and was compensated: provision answered 409"
    ])
    // Each step ran once: no replay ran a finished activity again.
    expect(r.stdout.match(/POST \/charges/g)).toHaveLength(2)
    expect(r.stdout).not.toContain("/accounts/delete")
    expect(r.stdout).not.toMatch(/mail \{"to":"taken/)
  })

  const fanout = (r: { stdout: string }) => {
    for (const hook of ["a", "c"]) expect(r.stdout).toContain(`subscriber /hooks/${hook} delivery 1: 204`)
    inOrder(r.stdout, [
      "subscriber /hooks/b delivery 1: 503",
      "subscriber /hooks/b delivery 2: 503",
      "subscriber /hooks/b delivery 3: 204",
      "push:main@4f2a9c1 delivered to 3 subscribers in 5 attempts"
    ])
    expect(r.stdout).not.toMatch(/hooks\/[ac] delivery 2/)
  }

  it("workflow-fanout.ts: child workflows joined by their parent (SQLite)", async () => {
    const r = await runExample("workflow-fanout")
    expect(r.code, r.stderr).toBe(0)
    fanout(r)
  })

  it.skipIf(!pgAvailable)("workflow-fanout.ts on PostgreSQL", async () => {
    const db = await freshPgDatabase()
    try {
      const r = await runExample("workflow-fanout", { DOCKET_DATABASE_URL: db.url })
      expect(r.code, r.stderr).toBe(0)
      fanout(r)
    } finally {
      await db.drop()
    }
  })

  const approval = (r: { stdout: string }) =>
    inOrder(r.stdout, [
      "refund of 80 EUR for order-1042: approval asked",
      /execution [0-9a-f]{12}\.\.\. is suspended, waiting for its decision/,
      `$ docket workflow complete <token> --value '"approved by ada"'`,
      "refund of 80 EUR for order-1042 paid (approved by ada)",
      "workflow result: approved by ada",
      "docket workflow show: complete, activities ask, pay"
    ])

  it("workflow-approval.ts: a deferred completed from another process through the command (SQLite)", async () => {
    const r = await runExample("workflow-approval")
    expect(r.code, r.stderr).toBe(0)
    approval(r)
    expect(r.stdout.match(/approval asked/g)).toHaveLength(1)
  })

  it.skipIf(!pgAvailable)("workflow-approval.ts on PostgreSQL", async () => {
    const db = await freshPgDatabase()
    try {
      const r = await runExample("workflow-approval", { DOCKET_DATABASE_URL: db.url })
      expect(r.code, r.stderr).toBe(0)
      approval(r)
    } finally {
      await db.drop()
    }
  })
})
